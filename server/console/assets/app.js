// yuebing operator console. Plain browser JavaScript, no build step and no
// dependencies: every figure comes from this node's /v1 API, called with
// the token the operator entered (kept in sessionStorage, so it lasts as
// long as the tab). The console only reads: every call it makes is listed
// in READS below, and server/console's tests hold each to that.
"use strict";

const TOKEN_KEY = "yuebing.token";
const REFRESH_MS = 2000;

// READS is every API call the console makes, as "METHOD path-prefix".
// None changes data: the POSTs compute keys or look keys up.
const READS = [
  "GET /v1/stats", "GET /v1/stats/history", "GET /v1/cluster", "GET /v1/cluster/nodes",
  "GET /v1/cluster/hot", "POST /v1/cluster/holders", "POST /v1/keys", "POST /v1/batch/exists",
  "GET /v1/contexts", "GET /v1/conductor/stats", "GET /v1/conductor/instances",
];

class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(method, path, body) {
  const route = method + " " + path.split("?")[0];
  if (!READS.some((r) => route === r || route.startsWith(r + "/"))) {
    throw new Error("console: " + route + " is not a read the console makes");
  }
  const headers = { Accept: "application/json" };
  const tok = sessionStorage.getItem(TOKEN_KEY);
  if (tok) headers.Authorization = "Bearer " + tok;
  const init = { method, headers, cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  let data = null;
  try {
    data = await r.json();
  } catch (e) {
    data = null;
  }
  if (!r.ok) {
    const e = (data && data.error) || {};
    throw new APIError(r.status, e.code || "", e.message || r.statusText);
  }
  return data;
}

// ---- DOM helpers: text always goes in as text, never as markup. ----

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const $ = (sel) => document.querySelector(sel);
const card = (title, ...body) => h("section", { class: "card" }, h("h3", {}, title), ...body);
const muted = (...t) => h("div", { class: "muted" }, ...t);
// figure shows a value big; id and data-value let tests read the raw figure.
const figure = (id, text, value) => h("div", { class: "figure", id, "data-value": value === undefined ? text : value }, text);
const grid = (...cards) => h("div", { class: "grid" }, ...cards);

function table(headers, rows) {
  return h("div", { class: "scroll" }, h("table", {},
    h("thead", {}, h("tr", {}, headers.map((c) => h("th", { class: c.num ? "num" : null }, c.label || c)))),
    h("tbody", {}, rows)));
}
const td = (v, attrs) => h("td", attrs || {}, v);
const tdn = (v, attrs) => h("td", Object.assign({ class: "num" }, attrs || {}), v);

function bar(used, cap) {
  const f = cap > 0 ? Math.min(used / cap, 1) : 0;
  return h("div", { class: f > 0.9 ? "bar high" : "bar", role: "meter", "aria-valuenow": Math.round(f * 100), "aria-valuemin": 0, "aria-valuemax": 100 },
    fill(f));
}

// fill sets the width through the CSSOM: the page's CSP refuses inline
// style attributes.
function fill(f) {
  const el = h("span", {});
  el.style.width = (f * 100).toFixed(1) + "%";
  return el;
}

// ---- Formatting ----

function fmtBytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
}
const fmtInt = (n) => Number(n).toLocaleString("en-US");
function fmtDur(s) {
  s = Math.max(0, Math.floor(s));
  const d = Math.floor(s / 86400), hh = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  if (d > 0) return d + "d " + hh + "h";
  if (hh > 0) return hh + "h " + m + "m";
  if (m > 0) return m + "m " + (s % 60) + "s";
  return s + "s";
}
const pct = (a, b) => (b > 0 ? ((100 * a) / b).toFixed(1) + "%" : "–");
const fmtRate = (v) => (v === 0 || v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
const shortKey = (k) => h("span", { class: "key", title: k }, k.slice(0, 16) + "…");

// ---- Charts: small SVG line charts (docs/console.md says why no library). ----

const SVG = "http://www.w3.org/2000/svg";
function s(tag, attrs, text) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

// lineChart draws points [{t: ms, v: number|null}] (null breaks the line).
function lineChart(id, points, { fmt = fmtRate, max } = {}) {
  const W = 600, H = 170, L = 52, R = 10, T = 10, B = 22;
  const svg = s("svg", { class: "chart", id, viewBox: `0 0 ${W} ${H}`, role: "img" });
  const vals = points.map((p) => p.v).filter((v) => v !== null);
  if (points.length < 2 || vals.length === 0) {
    svg.append(s("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "collecting samples…"));
    return svg;
  }
  let top = max !== undefined ? max : Math.max(...vals);
  if (max === undefined) {
    // Round the top up to 1, 2 or 5 times a power of ten.
    const p = Math.pow(10, Math.floor(Math.log10(top || 1)));
    top = [1, 2, 5, 10].map((m) => m * p).find((c) => c >= top) || 1;
  }
  const t0 = points[0].t, t1 = points[points.length - 1].t;
  const x = (t) => L + ((t - t0) / Math.max(t1 - t0, 1)) * (W - L - R);
  const y = (v) => H - B - (v / top) * (H - T - B);
  for (const f of [0, 0.5, 1]) {
    svg.append(s("line", { class: "grid", x1: L, x2: W - R, y1: y(top * f), y2: y(top * f) }));
    svg.append(s("text", { x: L - 6, y: y(top * f) + 4, "text-anchor": "end" }, fmt(top * f)));
  }
  const span = Math.round((t1 - t0) / 1000);
  svg.append(s("text", { x: L, y: H - 5 }, "−" + fmtDur(span)));
  svg.append(s("text", { x: W - R, y: H - 5, "text-anchor": "end" }, "now"));
  let d = "", pen = false;
  for (const p of points) {
    if (p.v === null) {
      pen = false;
      continue;
    }
    d += (pen ? "L" : "M") + x(p.t).toFixed(1) + " " + y(Math.min(p.v, top)).toFixed(1);
    pen = true;
  }
  svg.append(s("path", { class: "line", d }));
  const last = vals[vals.length - 1];
  svg.setAttribute("aria-label", "latest " + fmt(last));
  svg.setAttribute("data-last", last);
  return svg;
}

// rates turns counter samples into per-interval series.
function rates(samples) {
  const hit = [], req = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1], b = samples[i];
    const t = Date.parse(b.time), dt = (t - Date.parse(a.time)) / 1000;
    if (dt <= 0) continue;
    const dh = b.hits - a.hits, dm = b.misses - a.misses;
    hit.push({ t, v: dh + dm > 0 ? (100 * dh) / (dh + dm) : null });
    req.push({ t, v: Math.max(b.requests - a.requests, 0) / dt });
  }
  return { hit, req };
}

// ---- Pages ----

async function overview(el) {
  const [st, hist] = await Promise.all([api("GET", "/v1/stats"), api("GET", "/v1/stats/history")]);
  const s = st.store;
  $("#node").textContent = st.node + " · " + st.version;
  const { hit, req } = rates(hist.samples);
  const tiers = s.tiers.map((t) => card("Tier " + t.name,
    h("div", { class: "figure", id: "tier-" + t.name + "-used", "data-value": t.used_bytes }, fmtBytes(t.used_bytes)),
    bar(t.used_bytes, t.capacity_bytes),
    muted("of ", fmtBytes(t.capacity_bytes), " · ", h("span", { id: "tier-" + t.name + "-blocks", "data-value": t.blocks }, fmtInt(t.blocks)), " blocks · ",
      fmtBytes(t.pinned_bytes || 0), " pinned")));
  const activity = s.tiers.map((t) => h("tr", {},
    td(t.name), tdn(fmtInt(t.hits)), tdn(fmtInt(t.misses)), tdn(fmtInt(t.puts)), tdn(fmtInt(t.evictions), { id: "tier-" + t.name + "-evictions" }),
    tdn(fmtInt(t.demotions)), tdn(fmtInt(t.promotions)), tdn(fmtInt(t.corrupt))));
  el.replaceChildren(
    grid(
      card("Node", figure("node-name", st.node), muted("version ", h("span", { id: "version" }, st.version), " · up ", h("span", { id: "uptime" }, fmtDur(st.uptime_seconds)))),
      card("Blocks", figure("blocks", fmtInt(s.blocks), s.blocks), muted(fmtInt(st.contexts), " contexts · index ", fmtBytes(s.index_bytes))),
      card("Hit rate since start", figure("hit-rate", pct(s.hits, s.hits + s.misses)), muted(fmtInt(s.hits), " hits · ", fmtInt(s.misses), " misses")),
      card("HTTP requests", figure("requests", fmtInt(st.requests), st.requests), muted(fmtBytes(st.inflight_bytes), " in flight")),
    ),
    grid(...tiers),
    grid(
      card("Hit rate, % of reads (every " + hist.interval_seconds + " s)", lineChart("chart-hit-rate", hit, { max: 100, fmt: (v) => v.toFixed(0) + "%" })),
      card("HTTP requests per second", lineChart("chart-requests", req)),
    ),
    card("Tier activity since start", table(
      ["tier", { label: "hits", num: 1 }, { label: "misses", num: 1 }, { label: "puts", num: 1 }, { label: "evictions", num: 1 },
        { label: "demotions", num: 1 }, { label: "promotions", num: 1 }, { label: "corrupt", num: 1 }], activity),
      muted(fmtInt(s.dropped_demotions), " demotions dropped (queue full)")),
  );
}

function consoleURL(addr) {
  return "http://" + addr + "/ui/";
}

async function cluster(el) {
  let cl;
  try {
    cl = await api("GET", "/v1/cluster");
  } catch (e) {
    if (e.code === "no_cluster") {
      el.replaceChildren(card("Cluster", h("p", { id: "no-cluster" }, "This node runs alone. Start it with --cluster NAME to join a cluster.")));
      return;
    }
    throw e;
  }
  const nodes = (await api("GET", "/v1/cluster/nodes")).nodes;
  const ls = cl.leader_status || null;
  const rep = (ls && ls.replication) || {};
  const rows = nodes.map((n) => {
    const st = n.stats;
    const tiers = st ? st.store.tiers : [];
    return h("tr", { id: "member-" + n.name },
      td(h("a", { href: consoleURL(n.addrs.http) }, n.name), {}),
      tdn(n.id), td(n.leader ? "leader" : "", { class: "ok" }), td(n.addrs.http),
      tdn(st ? fmtInt(st.store.blocks) : "–", { class: "num", "data-blocks": st ? st.store.blocks : "" }),
      td(tiers.map((t) => h("div", {}, t.name + " " + fmtBytes(t.used_bytes) + " / " + fmtBytes(t.capacity_bytes), bar(t.used_bytes, t.capacity_bytes)))),
      td(st ? pct(st.store.hits, st.store.hits + st.store.misses) : ""),
      td(st ? fmtDur(st.uptime_seconds) : ""),
      td(n.error || "", { class: "error" }));
  });
  el.replaceChildren(
    grid(
      card("Cluster", figure("cluster-name", cl.cluster), muted(h("span", { id: "members", "data-value": cl.members.length }, cl.members.length), " members")),
      card("Leader", figure("leader", cl.has_leader ? cl.leader.name : "electing…"), muted("term ", h("span", { id: "term" }, cl.has_leader ? cl.leader.term : "–"))),
      card("Global index", figure("index-blocks", ls ? fmtInt(ls.blocks) : "–", ls ? ls.blocks : ""), muted(ls ? fmtBytes(ls.index_bytes) + " of index" : "the leader did not answer")),
      card("Replication", figure("repl-inflight", fmtInt(rep.InFlight || 0), rep.InFlight || 0),
        muted("in flight · ", fmtInt(rep.Queued || 0), " queued · ", fmtInt(rep.Hot || 0), " hot · ", fmtInt(rep.Copies || 0), " copies · ",
          fmtInt(rep.Drops || 0), " drops · ", fmtInt(rep.Failed || 0), " failed")),
    ),
    card("Members", table(["node", { label: "id", num: 1 }, "", "http", { label: "blocks", num: 1 }, "fill", "hit rate", "up", ""], rows)),
    card("This node's transfers", muted(
      fmtInt(cl.counters.fetches), " fetches (", fmtBytes(cl.counters.fetched_bytes), ") · ", fmtInt(cl.counters.fetch_failures), " failed · ",
      fmtInt(cl.counters.exposed), " served to peers · ", fmtInt(cl.counters.reports), " reports to the leader")),
  );
}

function parseTokens(text) {
  const parts = text.split(/[\s,\[\]]+/).filter((p) => p !== "");
  const out = parts.map(Number);
  const bad = parts.find((p, i) => !Number.isInteger(out[i]) || out[i] < 0 || out[i] > 4294967295);
  if (bad !== undefined) throw new Error("token ids are integers from 0 to 4294967295, not " + JSON.stringify(bad));
  return out;
}

function keysForm(el) {
  const result = h("div", { id: "lookup-result" });
  const ns = h("input", { id: "ns", name: "namespace", placeholder: "tenant/model", value: sessionStorage.getItem("yuebing.ns") || "", required: true, size: 24 });
  const bs = h("input", { id: "block-size", name: "block_size", type: "number", min: 16, max: 1024, value: 256, size: 6 });
  const toks = h("textarea", { id: "tokens", placeholder: "token ids, e.g. 1 2 3 … (or keys below)" });
  const keys = h("textarea", { id: "keys", placeholder: "or block keys, 64 hex digits each, in chain order" });
  const form = h("form", { id: "lookup", onsubmit: (ev) => {
    ev.preventDefault();
    sessionStorage.setItem("yuebing.ns", ns.value);
    lookup(ns.value, Number(bs.value), toks.value, keys.value, result).catch((e) => result.replaceChildren(h("p", { class: "error" }, e.message)));
  } },
  h("div", { class: "inline" }, h("label", {}, "Namespace", ns), h("label", {}, "Block size", bs)),
  toks, keys, h("button", { type: "submit" }, "Look up"));
  el.replaceChildren(
    card("Prefix lookup", form, result),
    h("div", { id: "keys-live" }),
  );
}

async function lookup(ns, blockSize, tokText, keyText, out) {
  let keys;
  if (tokText.trim() !== "") {
    const r = await api("POST", "/v1/keys", { namespace: ns, block_size: blockSize, tokens: parseTokens(tokText) });
    keys = r.keys;
  } else {
    keys = keyText.split(/\s+/).filter((k) => k !== "");
  }
  if (keys.length === 0) {
    out.replaceChildren(h("p", {}, "No full block: give at least one block of tokens, or a key."));
    return;
  }
  const ex = await api("POST", "/v1/batch/exists", { namespace: ns, keys });
  let holders = null;
  try {
    holders = (await api("POST", "/v1/cluster/holders", { keys })).blocks;
  } catch (e) {
    holders = null; // a tenant, or a node alone: no cluster view
  }
  const rows = keys.map((k, i) => h("tr", {},
    tdn(i), td(shortKey(k)), td(ex.exists[i] ? "stored" : "missing", { class: ex.exists[i] ? "ok" : "error" }), td(ex.tiers[i] || ""),
    holders ? tdn(holders[i].replicas) : null,
    holders ? td(holders[i].nodes.map((n) => n.name + " (" + n.tiers.join(", ") + ")").join("; ")) : null));
  const tiers = Object.entries(ex.prefix_tiers).map(([t, n]) => t + " " + n).join(", ");
  out.replaceChildren(
    h("p", {}, "Cached prefix: ", h("b", { id: "prefix-len", "data-value": ex.prefix_len }, ex.prefix_len), " of " + keys.length + " blocks",
      tokText.trim() !== "" ? " (" + fmtInt(ex.prefix_len * blockSize) + " tokens)" : "", tiers ? " · " + tiers : ""),
    table(["#", "key", "", "tier"].concat(holders ? [{ label: "replicas", num: 1 }, "nodes"] : []), rows));
}

async function keysLive(el) {
  const live = $("#keys-live");
  if (!live) return;
  const parts = [];
  try {
    const hot = (await api("GET", "/v1/cluster/hot?limit=20")).blocks;
    parts.push(card("Hottest blocks (leader's heat window)", hot.length === 0 ? muted("No block has been read in the window.") : table(
      ["key", { label: "reads", num: 1 }, { label: "replicas", num: 1 }, { label: "desired", num: 1 }, { label: "moving", num: 1 }, "nodes (tiers)"],
      hot.map((b) => h("tr", { "data-key": b.key, "data-heat": b.heat, "data-replicas": b.replicas }, td(shortKey(b.key)), tdn(b.heat), tdn(b.replicas), tdn(b.desired), tdn(b.in_flight),
        td(b.nodes.map((n) => n.name + " (" + n.tiers.join(", ") + ")").join("; ")))))));
  } catch (e) {
    const why = e.code === "no_cluster" ? "Hot blocks are counted by a cluster's leader; this node runs alone."
      : e.status === 403 ? "Hot blocks span every tenant: they need an admin token." : e.message;
    parts.push(card("Hottest blocks", muted(why)));
  }
  const ctx = await api("GET", "/v1/contexts?limit=50");
  const now = Date.now();
  parts.push(card("Contexts (pinned prompts)", ctx.contexts.length === 0 ? muted("No context.") : table(
    ["id", "namespace", "name", { label: "blocks", num: 1 }, "expires in"],
    ctx.contexts.map((c) => h("tr", {},
      td(h("a", { href: "#/keys/" + c.id }, c.id.slice(0, 12))), td(c.namespace), td(c.name || ""), tdn(c.blocks),
      td(fmtDur((Date.parse(c.expires_at) - now) / 1000)))))));
  const sel = location.hash.split("/")[2];
  if (sel) {
    try {
      const c = await api("GET", "/v1/contexts/" + encodeURIComponent(sel));
      const res = Object.entries(c.resident).map(([t, n]) => t + " " + n).join(", ");
      parts.push(card("Context " + c.id, h("p", { id: "context-detail" },
        "Namespace ", h("b", {}, c.namespace), c.name ? " · " + c.name : "", " · pinned for ", h("b", { id: "context-ttl", "data-value": c.ttl_seconds }, fmtDur(c.ttl_seconds)),
        " more, until ", new Date(c.expires_at).toLocaleTimeString("en-GB"), " · ", c.keys.length, " blocks: ", res || "none resident", c.missing ? " · " + c.missing + " missing" : "")));
    } catch (e) {
      parts.push(card("Context", h("p", { class: "error" }, e.message)));
    }
  }
  live.replaceChildren(...parts);
}

async function conductor(el) {
  const [st, inst] = await Promise.all([api("GET", "/v1/conductor/stats"), api("GET", "/v1/conductor/instances")]);
  const d = st.decisions;
  const rejected = Object.values(d.rejected).reduce((a, b) => a + b, 0);
  const sec = (v) => v.toFixed(2) + " s";
  el.replaceChildren(
    grid(
      card("Accepted", figure("accepted", fmtInt(d.accepted), d.accepted), muted("requests placed")),
      card("Rejected", figure("rejected", fmtInt(rejected), rejected),
        muted(Object.entries(d.rejected).map(([r, n]) => h("div", { id: "rejected-" + r, "data-value": n }, r.replace("_", " ").toUpperCase() + ": " + fmtInt(n))))),
      card("Instances", figure("instances", inst.instances.length), muted(Object.entries(st.instances).map(([r, n]) => r + " " + n).join(" · ") || "none registered")),
      card("SLOs", figure("slo", "TTFT " + st.ttft_slo_seconds + " s"), muted("TBT ", st.tbt_slo_seconds, " s · migrations: ", st.migrations.queued, " queued, ",
        st.migrations.dropped, " dropped, ", st.migrations.failed, " failed")),
    ),
    card("Instances", table(["id", "role", "addr", { label: "blocks", num: 1 }, { label: "queue", num: 1 }, { label: "batch", num: 1 },
      { label: "TBT", num: 1 }, { label: "load", num: 1 }, { label: "scheduled", num: 1 }, { label: "heartbeat", num: 1 }],
    inst.instances.map((i) => h("tr", { id: "instance-" + i.id }, td(i.id), td(i.role), td(i.addr || ""), tdn(fmtInt(i.blocks || 0)),
      tdn(sec(i.queue_s || 0), { "data-queue": i.queue_s || 0 }), tdn(i.batch || 0), tdn(sec(i.tbt_s || 0)), tdn((i.load || 0).toFixed(2), { class: i.load > 1 ? "num error" : "num" }),
      tdn(fmtInt(i.scheduled || 0)), tdn(sec(i.since_heartbeat_s || 0) + " ago"))))),
  );
}

const PAGES = {
  overview: { draw: overview },
  cluster: { draw: cluster },
  keys: { init: keysForm, draw: keysLive },
  conductor: { draw: conductor },
};

// ---- Shell: login, navigation, polling. ----

let current = null;
let busy = false;

function pageName() {
  const p = (location.hash.replace(/^#\/?/, "").split("/")[0]) || "overview";
  return PAGES[p] ? p : "overview";
}

function showLogin(msg) {
  $("#login").hidden = false;
  $("#page").hidden = true;
  $("#login-error").textContent = msg || "";
  $("#token").focus();
}

async function refresh() {
  if (busy || !$("#login").hidden) return;
  busy = true;
  const name = pageName();
  const el = $("#page");
  try {
    if (current !== name) {
      current = name;
      el.replaceChildren();
      for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.page === name);
      if (PAGES[name].init) PAGES[name].init(el);
    }
    await PAGES[name].draw(el);
    $("#updated").textContent = "updated " + new Date().toLocaleTimeString("en-GB") + " · refreshes every " + REFRESH_MS / 1000 + " s";
    el.dataset.loaded = name;
  } catch (e) {
    if (e.status === 401) {
      const had = sessionStorage.getItem(TOKEN_KEY) !== null;
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin(had ? "That token was not accepted: " + e.message : "");
    } else if (e.status === 403 && !PAGES[name].init) {
      el.replaceChildren(card("Needs an admin token", h("p", { id: "forbidden" },
        "This page shows every tenant's figures; the token in use is a tenant's. The Keys page shows your own namespaces.")));
      el.dataset.loaded = name;
    } else {
      el.replaceChildren(card("Error", h("p", { class: "error", id: "error" }, e.message)));
    }
  } finally {
    busy = false;
  }
}

// probe names the node in the header and shows the conductor's page
// when the node runs one.
async function probe() {
  try {
    const st = await api("GET", "/v1/stats");
    $("#node").textContent = st.node + " · " + st.version;
  } catch (e) {
    // A tenant's token: the header stays plain.
  }
  try {
    await api("GET", "/v1/conductor/stats");
    $('#nav a[data-page="conductor"]').hidden = false;
  } catch (e) {
    // 404: this node runs no conductor; 401/403: not ours to show.
  }
}

function start() {
  $("#login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("#token").value.trim());
    $("#token").value = "";
    $("#login").hidden = true;
    $("#page").hidden = false;
    current = null;
    begin();
  });
  $("#logout").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    location.reload();
  });
  window.addEventListener("hashchange", refresh);
  setInterval(refresh, REFRESH_MS);
  begin();
}

async function begin() {
  $("#logout").hidden = sessionStorage.getItem(TOKEN_KEY) === null;
  await refresh();
  if ($("#login").hidden) probe();
}

start();
