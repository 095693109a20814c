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

// seriesChart draws series over time. times are sample times (ms); each
// series {name, vals} holds one value per time, null where there is none.
// kind "bars" stacks the series in a bar per interval that has any (an
// interval with nothing draws nothing); kind "lines" joins values with a
// dot on each, so a lone value shows. A chart with no value at all says
// so (empty) instead of drawing a flat zero.
function seriesChart(id, times, series, { kind = "lines", fmt = fmtRate, max, empty = "no requests yet" } = {}) {
  const W = 600, H = 170, L = 58, R = 10, T = 18, B = 22;
  const svg = s("svg", { class: "chart", id, viewBox: `0 0 ${W} ${H}`, role: "img" });
  const has = (i) => series.some((se) => se.vals[i] !== null && (kind === "lines" || se.vals[i] > 0));
  const idx = times.map((_, i) => i).filter(has);
  svg.setAttribute("data-points", idx.length);
  if (times.length === 0) {
    svg.append(s("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "collecting samples…"));
    return svg;
  }
  if (idx.length === 0) {
    svg.setAttribute("data-empty", "true");
    svg.setAttribute("aria-label", empty);
    svg.append(s("text", { class: "empty", x: W / 2, y: H / 2, "text-anchor": "middle" }, empty));
    return svg;
  }
  const tops = idx.map((i) => kind === "bars" ? series.reduce((a, se) => a + (se.vals[i] || 0), 0) : Math.max(...series.map((se) => se.vals[i] === null ? 0 : se.vals[i])));
  let top = max !== undefined ? max : Math.max(...tops);
  if (max === undefined) {
    // Round the top up to 1, 2 or 5 times a power of ten.
    const p = Math.pow(10, Math.floor(Math.log10(top || 1)));
    top = [1, 2, 5, 10].map((m) => m * p).find((c) => c >= top * 0.9999) || 1;
  }
  const t0 = times[0], t1 = times[times.length - 1];
  const span = Math.max(t1 - t0, 1);
  const P = 9; // keeps the first and last bars and dots inside the axes
  const x = (t) => times.length === 1 ? (L + W - R) / 2 : L + P + ((t - t0) / span) * (W - L - R - 2 * P);
  const y = (v) => H - B - (Math.min(v, top) / top) * (H - T - B);
  for (const f of [0, 0.5, 1]) {
    svg.append(s("line", { class: "grid", x1: L, x2: W - R, y1: y(top * f), y2: y(top * f) }));
    svg.append(s("text", { x: L - 6, y: y(top * f) + 4, "text-anchor": "end" }, fmt(top * f)));
  }
  svg.append(s("text", { x: L, y: H - 5 }, "−" + fmtDur(Math.round((t1 - t0) / 1000))));
  svg.append(s("text", { x: W - R, y: H - 5, "text-anchor": "end" }, "now"));
  if (series.length > 1) {
    let lx = W - R;
    for (let k = series.length - 1; k >= 0; k--) {
      const label = s("text", { x: lx, y: 11, "text-anchor": "end" }, series[k].name);
      svg.append(label);
      lx -= series[k].name.length * 7 + 14;
      svg.append(s("rect", { class: "s" + k, x: lx, y: 3, width: 9, height: 9 }));
      lx -= 14;
    }
  }
  if (kind === "bars") {
    const bw = Math.max(2, Math.min(16, ((W - L - R) / Math.max(times.length, 1)) * 0.7));
    for (const i of idx) {
      let base = 0;
      series.forEach((se, k) => {
        const v = se.vals[i] || 0;
        if (v <= 0) return;
        const rect = s("rect", { class: "s" + k, x: (x(times[i]) - bw / 2).toFixed(1), y: y(base + v).toFixed(1), width: bw.toFixed(1), height: Math.max(y(base) - y(base + v), 1).toFixed(1) });
        rect.append(s("title", {}, se.name + " " + fmt(v)));
        svg.append(rect);
        base += v;
      });
    }
  } else {
    series.forEach((se, k) => {
      let d = "", pen = false;
      se.vals.forEach((v, i) => {
        if (v === null) {
          pen = false;
          return;
        }
        d += (pen ? "L" : "M") + x(times[i]).toFixed(1) + " " + y(v).toFixed(1);
        pen = true;
        svg.append(s("circle", { class: "s" + k, cx: x(times[i]).toFixed(1), cy: y(v).toFixed(1), r: 2.5 }));
      });
      svg.append(s("path", { class: "series s" + k, d }));
    });
  }
  const first = series[0].vals.filter((v) => v !== null);
  if (first.length > 0) {
    const last = first[first.length - 1];
    svg.setAttribute("aria-label", "latest " + fmt(last));
    svg.setAttribute("data-last", last);
  }
  return svg;
}

function fmtPct(v) {
  if (v === 0) return "0%";
  if (v < 0.01) return v.toExponential(0) + "%";
  return v.toFixed(v < 1 ? 2 : v < 10 ? 1 : 0) + "%";
}
const fmtCount = (v) => (Number.isInteger(v) ? fmtInt(v) : v.toFixed(1));

const FRONT_ENDS = [["http", "HTTP"], ["redis", "Redis"], ["shm", "Shared memory"], ["transfer", "Transfer"]];

function fmtSecs(v) {
  if (v === 0) return "0";
  if (v < 0.001) return (v * 1e6).toFixed(0) + " µs";
  if (v < 1) return (v * 1e3).toFixed(v < 0.01 ? 2 : v < 0.1 ? 1 : 0) + " ms";
  return v.toFixed(2) + " s";
}

// rates turns counter samples into per-interval series: hit rate, hits
// and misses, each front end's request rate and latency, each tier's
// fill (at the interval's end).
function rates(samples) {
  const out = { t: [], hit: [], hits: [], misses: [], moves: [[], [], []], fe: {}, fill: {} };
  const names = new Set();
  const tiers = [];
  for (const sm of samples) {
    for (const n of Object.keys(sm.front_ends || {})) names.add(n);
    for (const t of sm.tiers || []) if (!tiers.includes(t.name)) tiers.push(t.name);
  }
  for (const [n] of FRONT_ENDS) if (names.has(n)) out.fe[n] = { rate: [], p50: [], p99: [], timed: false };
  for (const n of tiers) out.fill[n] = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1], b = samples[i];
    const t = Date.parse(b.time), dt = (t - Date.parse(a.time)) / 1000;
    if (dt <= 0) continue;
    out.t.push(t);
    const dh = Math.max(b.hits - a.hits, 0), dm = Math.max(b.misses - a.misses, 0);
    out.hit.push(dh + dm > 0 ? (100 * dh) / (dh + dm) : null);
    out.hits.push(dh);
    out.misses.push(dm);
    ["evictions", "demotions", "promotions"].forEach((k, j) => out.moves[j].push(Math.max(b[k] - a[k], 0)));
    for (const [n, fe] of Object.entries(out.fe)) {
      const fa = (a.front_ends || {})[n], fb = (b.front_ends || {})[n];
      fe.rate.push(fa && fb ? Math.max(fb.requests - fa.requests, 0) / dt : null);
      fe.p50.push(fb && fb.p50_seconds !== undefined ? fb.p50_seconds : null);
      fe.p99.push(fb && fb.p99_seconds !== undefined ? fb.p99_seconds : null);
      if (fb && fb.timed) fe.timed = true;
    }
    for (const [n, vals] of Object.entries(out.fill)) {
      const tb = (b.tiers || []).find((x) => x.name === n);
      vals.push(tb && tb.capacity_bytes > 0 ? (100 * tb.used_bytes) / tb.capacity_bytes : null);
    }
  }
  return out;
}

function lastOf(vals) {
  for (let i = vals.length - 1; i >= 0; i--) if (vals[i] !== null) return vals[i];
  return null;
}

function frontEndCard(name, label, fe, times, every) {
  const rate = lastOf(fe.rate);
  const p50 = lastOf(fe.p50), p99 = lastOf(fe.p99);
  const note = fe.timed
    ? (p50 === null ? "no request timed yet" : "latest p50 " + fmtSecs(p50) + " · p99 " + fmtSecs(p99))
    : "counted, not timed: no latency";
  return card(label + " · requests per second",
    h("div", { class: "figure", id: "fe-" + name + "-rate", "data-value": rate === null ? "" : rate }, rate === null ? "–" : fmtRate(rate) + "/s"),
    muted(h("span", { id: "fe-" + name + "-latency" }, note), " · every " + every + " s"),
    h("div", { class: "pair" },
      seriesChart("chart-fe-" + name + "-rate", times, [{ name: "req/s", vals: fe.rate }], { kind: "bars" }),
      fe.timed ? seriesChart("chart-fe-" + name + "-latency", times, [{ name: "p50", vals: fe.p50 }, { name: "p99", vals: fe.p99 }], { fmt: fmtSecs }) : null));
}

// ---- Pages ----

async function overview(el) {
  const [st, hist] = await Promise.all([api("GET", "/v1/stats"), api("GET", "/v1/stats/history")]);
  const s = st.store;
  $("#node").textContent = st.node + " · " + st.version;
  const r = rates(hist.samples);
  const every = hist.interval_seconds;
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
      card("Hit rate, % of reads (every " + every + " s)", seriesChart("chart-hit-rate", r.t, [{ name: "hit rate", vals: r.hit }], { max: 100, fmt: (v) => v.toFixed(0) + "%", empty: "no reads yet" })),
      card("Hits and misses per " + every + " s", seriesChart("chart-hits-misses", r.t, [{ name: "hits", vals: r.hits }, { name: "misses", vals: r.misses }],
        { kind: "bars", fmt: fmtCount, empty: "no reads yet" })),
    ),
    h("h2", {}, "Front ends"),
    grid(...FRONT_ENDS.filter(([n]) => r.fe[n]).map(([n, label]) => frontEndCard(n, label, r.fe[n], r.t, every))),
    grid(
      card("Tier fill over time, % of capacity", seriesChart("chart-tier-fill", r.t, Object.entries(r.fill).map(([n, vals]) => ({ name: n, vals })),
        { fmt: fmtPct, empty: "nothing stored yet" })),
      card("Blocks moved between tiers per " + every + " s", seriesChart("chart-tier-moves", r.t,
        [{ name: "evicted", vals: r.moves[0] }, { name: "demoted", vals: r.moves[1] }, { name: "promoted", vals: r.moves[2] }],
        { kind: "bars", fmt: fmtCount, empty: "no block moved yet" })),
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
      fmtInt(cl.counters.served), " served to peers · ", fmtInt(cl.counters.reports), " reports to the leader")),
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

// HIT_SOURCES orders the router's hit-token sources: the engine's own
// cache, what it pulled from the store's tiers, and what it computed.
const HIT_SOURCES = ["hbm", "pulled_hbm", "pulled_dram", "pulled_ssd", "pulled_remote", "miss"];

// routerCards shows the router the node runs: its engines and their
// state, where prompt tokens' KV came from, and its decisions.
function routerCards(rt) {
  const scheduled = rt.engines.filter((e) => e.scheduled).length;
  const hit = rt.hit_tokens || {};
  const total = Object.values(hit).reduce((a, b) => a + b, 0);
  const cached = total - (hit.miss || 0);
  const dec = rt.decisions || {};
  const decTotal = Object.values(dec).reduce((a, b) => a + b, 0);
  const sources = HIT_SOURCES.concat(Object.keys(hit).filter((k) => !HIT_SOURCES.includes(k))).filter((k) => hit[k] !== undefined);
  const state = (e) => e.scheduled ? "scheduled" : !e.registered ? "deregistered" : "unhealthy";
  return [
    h("h2", {}, "Router"),
    grid(
      card("Engines", figure("router-engines", scheduled + " of " + rt.engines.length, scheduled), muted("scheduled: healthy and registered")),
      card("Prompt tokens cached", figure("router-hit-share", pct(cached, total), total > 0 ? cached / total : ""),
        muted(fmtInt(cached), " of ", h("span", { id: "router-hit-total", "data-value": total }, fmtInt(total)), " tokens of accepted requests")),
      card("Routing decisions", figure("router-decisions", fmtInt(decTotal), decTotal),
        muted(Object.entries(dec).sort().map(([k, v]) => h("div", { id: "router-decision-" + k, "data-value": v }, k.replace(/_/g, " ") + ": " + fmtInt(v))))),
    ),
    card("Engines the router runs", rt.engines.length === 0 ? muted("No engine.") : table(
      ["engine", "role", "url", "state", "probes", "operator", { label: "blocks", num: 1 }, "KV events"],
      rt.engines.map((e) => h("tr", { id: "engine-" + e.id, "data-state": state(e) },
        td(e.id), td(e.role), td(e.url), td(state(e), { class: e.scheduled ? "ok" : "error" }),
        td(e.healthy ? "healthy" : "failing"), td(e.registered ? "registered" : "deregistered"),
        tdn(fmtInt(e.blocks), { "data-blocks": e.blocks }), td(e.events ? "subscribed" : "none"))))),
    card("Prompt tokens by where their KV came from", total === 0 ? h("p", { id: "router-no-tokens", class: "muted" }, "No request routed yet.") : table(
      ["source", { label: "tokens", num: 1 }, { label: "share", num: 1 }, ""],
      sources.map((k) => h("tr", { id: "hit-" + k, "data-value": hit[k] },
        td(k === "hbm" ? "engine's own cache (hbm)" : k === "miss" ? "computed (miss)" : k.replace("pulled_", "pulled from ")),
        tdn(fmtInt(hit[k])), tdn(pct(hit[k], total)), td(bar(hit[k], total), { class: "wide" }))))),
  ];
}

async function conductor(el) {
  const [st, inst] = await Promise.all([api("GET", "/v1/conductor/stats"), api("GET", "/v1/conductor/instances")]);
  const d = st.decisions;
  const rejected = Object.values(d.rejected).reduce((a, b) => a + b, 0);
  const sec = (v) => v.toFixed(2) + " s";
  el.replaceChildren(
    ...(st.router ? routerCards(st.router).concat(h("h2", {}, "Scheduler")) : []),
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
