"""The native client of a yuebing node: objects by name and blocks by key,
batches, prefix lookup by token ids, contexts, replica counts."""

from __future__ import annotations

import json
import struct
import urllib.parse
from dataclasses import dataclass

from . import keys as _keys
from ._http import Pool, Response
from ._shm import Staging
from .errors import BadRequest, ChecksumMismatch, ConnectionFailed, NotFound, TooLarge, YuebingError, error_for, from_body

try:  # optional: CRC-32C in C; pure Python would cost more than the transfer
    import google_crc32c as _crc

    def _crc32c(mv) -> int:
        return _crc.value(bytes(mv)) if not isinstance(mv, (bytes, bytearray)) else _crc.value(mv)
except ImportError:  # pragma: no cover - depends on the machine
    _crc32c = None

_FRAME = struct.Struct("<32sIIQ")  # key, flags, crc32c, length: docs/api.md#framed-bodies
_FLAG_CRC, _FLAG_MISSING, _FLAG_PARENT = 1, 2, 4
_JSON = {"Content-Type": "application/json"}


@dataclass
class Item:
    """The outcome of one key of a batch call."""

    key: bytes
    status: str  # created, exists, ok, missing or error
    size: int = 0
    tier: str = ""
    error: YuebingError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.status != "missing"


@dataclass
class Match:
    """A prefix lookup: the first ``prefix_len`` blocks of the tokens are
    cached; ``keys`` are all full blocks' keys, ``tiers`` where each is."""

    prefix_len: int
    prefix_tokens: int
    keys: list[bytes]
    tiers: list[str]


# The node's retention classes (X-Yuebing-Retention).
RETENTIONS = ("pinned", "high", "normal", "low")


def _check_retention(retention: str | None, ttl: int | None = None) -> None:
    if retention is not None and retention not in RETENTIONS:
        raise BadRequest(0, "bad_request", f"retention {retention!r}: want one of {', '.join(RETENTIONS)}")
    if ttl is not None and (retention is None or isinstance(ttl, bool) or not isinstance(ttl, int) or ttl <= 0):
        raise BadRequest(0, "bad_request", f"retention_ttl {ttl!r}: want whole seconds above 0, with a retention")


def _retention_headers(h: dict, retention: str | None, ttl: int | None) -> None:
    if retention:
        h["X-Yuebing-Retention"] = retention
        if ttl is not None:
            h["X-Yuebing-Retention-TTL"] = str(ttl)


def _parent(parent, what: str = "parent") -> bytes | None:
    """A chain parent's key as 32 raw bytes (None for none); a malformed
    one is refused here, before anything of the put is sent, as the node
    would refuse the whole request."""
    if parent is None:
        return None
    try:
        return _keys.parse_key(parent)
    except (ValueError, TypeError) as e:
        raise BadRequest(0, "bad_request", f"{what}: {e}") from e


def _mv(buf, writable: bool = False) -> memoryview:
    try:
        mv = memoryview(buf)
    except TypeError as e:
        raise BadRequest(0, "bad_request", f"{type(buf).__name__} is not a buffer") from e
    if not mv.contiguous:
        raise BadRequest(0, "bad_request", "buffer is not contiguous")
    if writable and mv.readonly:
        raise BadRequest(0, "bad_request", "buffer is read-only")
    return mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv


class Client:
    """A client of one yuebing node.

    Safe for concurrent use from several threads: every call takes a pooled
    connection of its own, and the shared-memory segment is handed out in
    ranges. Failures raise a subclass of ``YuebingError`` carrying the
    server's status and code (``NotFound`` for a miss).

    ``shm`` chooses the data path of the zero-copy calls (``get_into``,
    ``put`` of a buffer, the ``*_into`` batches): ``"auto"`` maps a staging
    segment of ``shm_size`` bytes from the node when it runs on this host and
    falls back to the socket otherwise, ``True`` insists on it, ``False``
    always uses the socket (``recv_into`` straight into the caller's buffer).
    """

    def __init__(self, url: str = "http://127.0.0.1:8080", *, token: str | None = None,
                 namespace: str = "default/default", timeout: float = 60.0,
                 shm: bool | str = "auto", shm_size: int = 64 << 20, verify: bool = True):
        self.namespace = namespace
        self._token = token
        self._pool = Pool(url, timeout=timeout)
        self._auth = {"Authorization": f"Bearer {token}"} if token else {}
        self._verify = verify and _crc32c is not None
        self._shm: Staging | None = None
        if shm:
            try:
                self._shm = self._open_shm(shm_size)
            except (YuebingError, OSError):
                if shm is True:
                    self._pool.close()
                    raise

    # -- plumbing -------------------------------------------------------

    def _open_shm(self, size: int) -> Staging:
        info = self._json("GET", "/v1/shm")
        return Staging(info["socket"], self._token, size)

    def _usable_shm(self) -> Staging | None:
        st = self._shm
        return st if st is not None and not st.closed else None

    def _drop_shm(self) -> None:
        """Gives up shared memory after its session broke: the calls go on
        over the socket. The mapping stays until no call uses it."""
        st, self._shm = self._shm, None
        if st is not None:
            st.close()

    @property
    def shm(self) -> bool:
        """Whether the zero-copy calls go through shared memory."""
        return self._shm is not None

    def _req(self, method: str, path: str, headers=None, body=None, ok=(200,)) -> Response:
        h = dict(self._auth)
        if headers:
            h.update(headers)
        r = self._pool.request(method, path, h, body)
        if r.status not in ok:
            raise from_body(r.status, r.read())
        return r

    def _json(self, method: str, path: str, payload=None, ok=(200,), headers=None):
        body = None if payload is None else json.dumps(payload).encode()
        r = self._req(method, path, {**_JSON, **(headers or {})} if body is not None else headers, body, ok)
        data = r.read()
        return json.loads(data) if data else None

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.namespace

    @staticmethod
    def _obj(name: str) -> str:
        if not isinstance(name, str) or not name:
            raise BadRequest(0, "bad_request", f"object name {name!r}: want a non-empty string")
        return "/v1/objects/" + urllib.parse.quote(name, safe="")

    def _target(self, name=None, key=None) -> str:
        if key is not None:
            return "/v1/blocks/" + _keys.parse_key(key).hex()
        return self._obj(name)

    def _check(self, data, crc: str | None) -> None:
        if self._verify and crc:
            got = _crc32c(data)
            if got != int(crc, 16):
                raise ChecksumMismatch(0, "checksum_mismatch", f"crc32c {got:08x}, server says {crc}")

    def close(self) -> None:
        """Closes connections and the shared-memory session."""
        if self._shm is not None:
            self._shm.close()
            self._shm = None
        self._pool.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- single objects and blocks -------------------------------------

    def put(self, name: str | None, data, *, key=None, namespace: str | None = None,
            replicas: int | None = None, retention: str | None = None, retention_ttl: int | None = None,
            parent=None) -> Item:
        """Stores data (bytes or any buffer) as object ``name`` (or block
        ``key``). An existing key is not rewritten (status "exists"), but a
        ``retention`` given changes its class. ``retention`` (pinned,
        high, normal, low) is the node's retention class for the block,
        for ``retention_ttl`` seconds if given (then it lapses to normal);
        it travels as headers, so a put that names one goes over HTTP. A
        hard pin past the namespace's quota raises NoSpace (pin_quota).
        ``parent`` is the key (32 bytes or 64 hex digits) of the block
        before this one in its prefix chain, for the node's SSD admission
        (docs/policies.md); a malformed one raises BadRequest."""
        ns = self._ns(namespace)
        mv = _mv(data)
        _check_retention(retention, retention_ttl)
        if key is not None:
            key = _keys.parse_key(key)  # shared-memory items name it in hex, as the URL does
        par = _parent(parent)
        st = None if retention else self._usable_shm()
        if st is not None and 0 < len(mv) <= st.size:
            try:
                it = self._shm_put(st, ns, [(name, key, mv, par)], replicas)[0]
            except ConnectionFailed:
                self._drop_shm()
                return self.put(name, data, key=key, namespace=namespace, replicas=replicas, parent=par)
            if it.error is not None:
                raise it.error
            return it
        h = {"X-Yuebing-Namespace": ns, "Content-Type": "application/octet-stream"}
        if replicas:
            h["X-Yuebing-Replicas"] = str(replicas)
        _retention_headers(h, retention, retention_ttl)
        if par is not None:
            h["X-Yuebing-Parent"] = par.hex()
        r = self._req("PUT", self._target(name, key), h, mv, ok=(200, 201))
        res = json.loads(r.read())
        return Item(bytes.fromhex(res["key"]), "created" if res["created"] else "exists", res["size"], res.get("tier", ""))

    def get(self, name: str | None, *, key=None, namespace: str | None = None) -> bytes:
        """The object's (or block's) bytes; raises NotFound on a miss."""
        h = {"X-Yuebing-Namespace": self._ns(namespace)} if key is None or namespace else None
        r = self._req("GET", self._target(name, key), h)
        data = r.read()
        self._check(data, r.headers.get("x-yuebing-crc32c"))
        return data

    def get_into(self, name: str | None, buf, *, key=None, namespace: str | None = None,
                 offset: int | None = None) -> int:
        """Reads the object into buf (any writable buffer) and returns its
        size; raises TooLarge when it does not fit. With ``offset``, reads
        exactly len(buf) bytes of the object from that offset instead."""
        mv = _mv(buf, writable=True)
        ns = self._ns(namespace)
        st = self._usable_shm()
        if st is not None and 0 < len(mv) <= st.size:
            try:
                it = self._shm_get(st, ns, [(name, key, mv, offset)])[0]
            except ConnectionFailed:
                self._drop_shm()
                return self.get_into(name, buf, key=key, namespace=namespace, offset=offset)
            if it.error is not None:
                raise it.error
            if it.status == "missing":
                raise NotFound(404, "not_found", f"{name or key!r} in namespace {ns!r}")
            return it.size
        h = {"X-Yuebing-Namespace": ns} if key is None or namespace else {}
        if offset is not None:
            if offset < 0 or len(mv) == 0:
                raise BadRequest(0, "bad_request", f"range of {len(mv)} bytes at {offset}")
            h["Range"] = f"bytes={offset}-{offset + len(mv) - 1}"
        r = self._req("GET", self._target(name, key), h, ok=(200, 206))
        n = r.length
        if n > len(mv) or (offset is not None and n != len(mv)):
            r.discard()
            if offset is not None:
                raise BadRequest(416, "invalid_range", f"{len(mv)} bytes at {offset} run past the object's end")
            raise TooLarge(413, "too_large", f"object of {n} bytes, buffer of {len(mv)}")
        r.read_into(mv)
        if offset is None:
            self._check(mv[:n], r.headers.get("x-yuebing-crc32c"))
        return n

    def size(self, name: str | None, *, key=None, namespace: str | None = None) -> int:
        """The object's size; raises NotFound on a miss."""
        h = {"X-Yuebing-Namespace": self._ns(namespace)} if key is None or namespace else None
        r = self._req("HEAD", self._target(name, key), h)
        r.read()  # nothing: a HEAD answer has no body
        return int(r.headers.get("content-length", "0"))

    def tier(self, name: str | None, *, key=None, namespace: str | None = None) -> str:
        """Where the node reads the object from (its X-Yuebing-Tier: "dram",
        "ssd", "remote", ...); raises NotFound on a miss."""
        h = {"X-Yuebing-Namespace": self._ns(namespace)} if key is None or namespace else None
        r = self._req("HEAD", self._target(name, key), h)
        r.read()
        return r.headers.get("x-yuebing-tier", "")

    def holders(self, names=None, *, keys=None, namespace: str | None = None) -> list[list[dict]]:
        """Per object, the cluster nodes holding it ({"name", "tiers"});
        raises when the node is not in a cluster."""
        ts = self._names(names, keys)
        ks = [(k if k is not None else _keys.opaque_key(self._ns(namespace), n)).hex() for n, k in ts]
        res = self._json("POST", "/v1/cluster/holders", {"keys": ks})
        return [b.get("nodes") or [] for b in res.get("blocks", [])]

    def exists(self, name: str | None, *, key=None, namespace: str | None = None) -> bool:
        try:
            self.size(name, key=key, namespace=namespace)
            return True
        except NotFound:
            return False

    def delete(self, name: str | None, *, key=None, namespace: str | None = None) -> bool:
        """Deletes the object; False when it was not stored."""
        h = {"X-Yuebing-Namespace": self._ns(namespace)} if key is None or namespace else None
        try:
            self._req("DELETE", self._target(name, key), h).read()
            return True
        except NotFound:
            return False

    # -- batches --------------------------------------------------------

    def _names(self, names, keys_):
        if (names is None) == (keys_ is None):
            raise BadRequest(0, "bad_request", "give names or keys")
        if names is not None:
            return [(n, None) for n in names]
        return [(None, _keys.parse_key(k)) for k in keys_]

    @staticmethod
    def _ref(n, k) -> dict:
        return {"key": k.hex()} if k is not None else {"name": n}

    @staticmethod
    def _refs(targets) -> dict:
        if targets and targets[0][1] is not None:
            return {"keys": [k.hex() for _, k in targets]}
        return {"names": [n for n, _ in targets]}

    def exists_many(self, names=None, *, keys=None, namespace: str | None = None) -> list[bool]:
        """Whether each object (or block) is stored. In a cluster the node
        answers for the whole cluster, as a HEAD of each would: a key held
        by another node counts while that node answers."""
        ts = self._names(names, keys)
        if not ts:
            return []
        res = self._json("POST", "/v1/batch/exists", {"namespace": self._ns(namespace), **self._refs(ts)})
        return list(res["exists"])

    def delete_many(self, names=None, *, keys=None, namespace: str | None = None) -> list[bool]:
        ts = self._names(names, keys)
        if not ts:
            return []
        res = self._json("POST", "/v1/batch/delete", {"namespace": self._ns(namespace), **self._refs(ts)})
        return [r["deleted"] for r in res["results"]]

    def put_many(self, names=None, values=(), *, keys=None, namespace: str | None = None,
                 replicas: int | None = None, retention: str | None = None,
                 retention_ttl: int | None = None, chain: bool = False, parents=None) -> list[Item]:
        """Stores each value as its own put; one Item per value, in order.
        ``retention`` and ``retention_ttl`` as for put. ``chain=True`` says the
        keys are one prefix chain in order (each key's parent is the one
        before it): the node's SSD admission policy uses it to keep a chain's
        tail off flash (docs/policies.md). ``parents`` names each key's
        parent itself (a key, or None for none), for a batch that mixes
        several chains; an entry given wins over ``chain``. Both need keys,
        not names."""
        _check_retention(retention, retention_ttl)
        if (chain or parents is not None) and keys is None:
            raise BadRequest(0, "bad_request", "chain=True and parents need keys: names have no chain")
        ts = self._names(names, keys)
        vals = [_mv(v) for v in values]
        if len(vals) != len(ts):
            raise BadRequest(0, "bad_request", f"{len(ts)} keys and {len(vals)} values")
        pars = [None] * len(ts)
        if parents is not None:
            parents = list(parents)
            if len(parents) != len(ts):
                raise BadRequest(0, "bad_request", f"{len(ts)} keys and {len(parents)} parents")
            pars = [_parent(p, f"parents[{i}]") for i, p in enumerate(parents)]
        if not ts:
            return []
        ns = self._ns(namespace)
        st = None if retention else self._usable_shm()
        if st is not None and all(0 < len(v) for v in vals):
            # Shared-memory items carry no chain flag: each names its parent.
            shm_pars = [p if p is not None or not chain or i == 0 else ts[i - 1][1] for i, p in enumerate(pars)]
            try:
                out: list[Item] = []
                items = [(n, k, v, p) for (n, k), v, p in zip(ts, vals, shm_pars)]
                for group in self._groups(st, items, lambda x: len(x[2])):
                    out += self._shm_put(st, ns, group, replicas)
                return out
            except ConnectionFailed:
                self._drop_shm()  # puts are idempotent: the socket path redoes them all
        if ts[0][1] is not None:
            return self._frames_put(ns, ts, vals, replicas, retention, retention_ttl, chain, pars)
        out = []
        for (n, _), v in zip(ts, vals):
            try:
                out.append(self.put(n, v, namespace=ns, replicas=replicas, retention=retention,
                                    retention_ttl=retention_ttl))
            except YuebingError as e:
                out.append(Item(_keys.opaque_key(ns, n) if isinstance(n, str) else b"", "error", error=e))
        return out

    def _frames_put(self, ns, ts, vals, replicas, retention=None, retention_ttl=None, chain=False,
                    parents=None) -> list[Item]:
        parts: list = [b"YBF1"]
        for (n, k), v, p in zip(ts, vals, parents or [None] * len(ts)):
            if p is None:
                parts += [_FRAME.pack(k, 0, 0, len(v)), v]
            else:  # the parent's key follows the header; length does not count it
                parts += [_FRAME.pack(k, _FLAG_PARENT, 0, len(v)), p, v]
        h = {"X-Yuebing-Namespace": ns, "Content-Type": "application/x-yuebing-frames"}
        if replicas:
            h["X-Yuebing-Replicas"] = str(replicas)
        _retention_headers(h, retention, retention_ttl)
        if chain:
            h["X-Yuebing-Chain"] = "1"
        total = sum(len(memoryview(p)) for p in parts)
        body = bytearray(total)
        pos = 0
        for p in parts:
            m = memoryview(p)
            body[pos:pos + len(m)] = m
            pos += len(m)
        r = self._req("POST", "/v1/batch/put", h, body, ok=(200, 400, 413))
        res = json.loads(r.read())
        items = [self._item(x) for x in res.get("results", [])]
        if "error" in res:
            err = error_for(r.status, res["error"]["code"], res["error"]["message"])
            items += [Item(b"", "error", error=err)] * (len(ts) - len(items))
        return items

    @staticmethod
    def _item(x: dict) -> Item:
        err = None
        if x.get("error"):
            err = error_for(0, x["error"]["code"], x["error"]["message"])
        return Item(bytes.fromhex(x["key"]), x.get("status", "ok"), x.get("size", 0), x.get("tier", ""), err)

    def get_many(self, names=None, *, keys=None, namespace: str | None = None) -> list[bytes | None]:
        """The values, in order; None for each key not stored."""
        ts = self._names(names, keys)
        if not ts:
            return []
        out: list[bytes | None] = []
        r = self._req("POST", "/v1/batch/get", _JSON, json.dumps({"namespace": self._ns(namespace), **self._refs(ts)}).encode())
        body = memoryview(r.read())
        if bytes(body[:4]) != b"YBF1":
            raise ConnectionFailed(0, "protocol", "multi-get answer without the frame magic")
        pos = 4
        for _ in ts:
            _, flags, crc, n = _FRAME.unpack_from(body, pos)
            pos += _FRAME.size
            if flags & _FLAG_MISSING:
                out.append(None)
                continue
            data = bytes(body[pos:pos + n])
            pos += n
            if flags & _FLAG_CRC:
                self._check(data, f"{crc:08x}")
            out.append(data)
        return out

    def get_many_into(self, names=None, bufs=(), *, keys=None, namespace: str | None = None,
                      offsets=None) -> list[Item]:
        """Reads each object into its buffer; one Item per key with the
        bytes read (``size``), status "missing", or the error. With
        ``offsets`` (None entries for whole reads), reads exactly
        len(buf) bytes of the object from that offset."""
        ts = self._names(names, keys)
        mvs = [_mv(b, writable=True) for b in bufs]
        if len(mvs) != len(ts):
            raise BadRequest(0, "bad_request", f"{len(ts)} keys and {len(mvs)} buffers")
        offs = list(offsets) if offsets is not None else [None] * len(ts)
        ns = self._ns(namespace)
        st = self._usable_shm()
        if st is not None:
            reqs = [(n, k, m, o) for (n, k), m, o in zip(ts, mvs, offs)]
            small = [r for r in reqs if 0 < len(r[2]) <= st.size]
            if len(small) == len(reqs):
                try:
                    out: list[Item] = []
                    for group in self._groups(st, reqs, lambda x: len(x[2])):
                        out += self._shm_get(st, ns, group)
                    return out
                except ConnectionFailed:
                    self._drop_shm()
        out = []
        for (n, k), m, o in zip(ts, mvs, offs):
            try:
                size = self.get_into(n, m, key=k, namespace=namespace, offset=o)
                out.append(Item(k or b"", "ok", size))
            except NotFound:
                out.append(Item(k or b"", "missing"))
            except YuebingError as e:
                out.append(Item(k or b"", "error", error=e))
        return out

    # -- shared memory --------------------------------------------------

    @staticmethod
    def _groups(st: Staging, items, size):
        """Splits items into runs whose sizes fit the segment together."""
        cap = st.size // 2 if st.size >= 2 << 20 else st.size
        group, used = [], 0
        for it in items:
            n = max(4096, (size(it) + 4095) // 4096 * 4096)
            if group and used + n > cap:
                yield group
                group, used = [], 0
            group.append(it)
            used += n
        if group:
            yield group

    def _shm_put(self, st: Staging, ns, items, replicas) -> list[Item]:
        total = sum(max(4096, (len(v) + 4095) // 4096 * 4096) for _, _, v, _ in items)
        base = st.alloc(total)
        try:
            reqs, off = [], base
            for n, k, v, p in items:
                st.view[off:off + len(v)] = v
                r = {**self._ref(n, k), "offset": off, "length": len(v)}
                if p is not None:
                    r["parent"] = p.hex()
                reqs.append(r)
                off += max(4096, (len(v) + 4095) // 4096 * 4096)
            payload = {"op": "put", "namespace": ns, "items": reqs}
            if replicas:
                payload["replicas"] = replicas
            res = st.call(payload)
        finally:
            st.free(base, total)
        return [self._item(x) for x in res["results"]]

    def _shm_get(self, st: Staging, ns, items) -> list[Item]:
        sizes = [max(4096, (len(m) + 4095) // 4096 * 4096) for _, _, m, _ in items]
        total = sum(sizes)
        base = st.alloc(total)
        try:
            reqs, off = [], base
            for (n, k, m, o), sz in zip(items, sizes):
                r = {**self._ref(n, k), "offset": off, "length": len(m)}
                if o is not None:
                    r["from"] = o
                reqs.append(r)
                off += sz
            res = st.call({"op": "get", "namespace": ns, "items": reqs})
            out, off = [], base
            for (n, k, m, o), sz, x in zip(items, sizes, res["results"]):
                it = self._item(x)
                if it.status == "ok":
                    m[:it.size] = st.view[off:off + it.size]
                    if o is None:
                        try:
                            self._check(m[:it.size], x.get("crc32c"))
                        except ChecksumMismatch as e:
                            it = Item(it.key, "error", error=e)
                out.append(it)
                off += sz
            return out
        finally:
            st.free(base, total)

    # -- prefix lookup ----------------------------------------------------

    def keys(self, tokens, *, block_size: int = _keys.DEFAULT_BLOCK_SIZE, namespace: str | None = None) -> list[bytes]:
        """The chained keys of the full blocks of tokens (computed here,
        the same as POST /v1/keys)."""
        return _keys.chain_keys(self._ns(namespace), block_size, tokens)

    def lookup(self, tokens, *, block_size: int = _keys.DEFAULT_BLOCK_SIZE, namespace: str | None = None) -> Match:
        """How long a prefix of tokens is cached on this node."""
        ks = self.keys(tokens, block_size=block_size, namespace=namespace)
        if not ks:
            return Match(0, 0, [], [])
        res = self._json("POST", "/v1/batch/exists", {"namespace": self._ns(namespace), "keys": [k.hex() for k in ks]})
        return Match(res["prefix_len"], res["prefix_len"] * block_size, ks, list(res["tiers"]))

    # -- contexts, replicas, admin ----------------------------------------

    def create_context(self, ttl_seconds: int, *, names=None, keys=None, tokens=None,
                       block_size: int | None = None, name: str | None = None,
                       namespace: str | None = None) -> dict:
        """Pins blocks for ttl_seconds (a soft pin: not evicted meanwhile);
        exactly one of names, keys or tokens. Returns the context's view,
        whose "id" the other context calls take."""
        body: dict = {"namespace": self._ns(namespace), "ttl_seconds": ttl_seconds}
        if name:
            body["name"] = name
        if sum(x is not None for x in (names, keys, tokens)) != 1:
            raise BadRequest(0, "bad_request", "give exactly one of names, keys or tokens")
        if names is not None:
            body["names"] = list(names)
        elif keys is not None:
            body["keys"] = [_keys.parse_key(k).hex() for k in keys]
        else:
            body["tokens"] = list(tokens)
            if block_size:
                body["block_size"] = block_size
        return self._json("POST", "/v1/contexts", body, ok=(201,))

    def get_context(self, context_id: str) -> dict:
        return self._json("GET", "/v1/contexts/" + urllib.parse.quote(context_id, safe=""))

    def extend_context(self, context_id: str, ttl_seconds: int) -> dict:
        """Sets the context to expire ttl_seconds from now."""
        return self._json("PATCH", "/v1/contexts/" + urllib.parse.quote(context_id, safe=""), {"ttl_seconds": ttl_seconds})

    def delete_context(self, context_id: str) -> None:
        self._json("DELETE", "/v1/contexts/" + urllib.parse.quote(context_id, safe=""))

    def list_contexts(self, *, namespace: str | None = None, limit: int = 100) -> list[dict]:
        out, cursor = [], ""
        while True:
            q = urllib.parse.urlencode({"namespace": self._ns(namespace), "limit": limit, "cursor": cursor})
            res = self._json("GET", "/v1/contexts?" + q)
            out += res.get("contexts", [])
            cursor = res.get("next_cursor", "")
            if not cursor:
                return out

    def set_replicas(self, name: str | None, count: int, *, key=None, namespace: str | None = None) -> int:
        """Sets the block's replica count across the cluster (in a cluster)."""
        k = _keys.parse_key(key) if key is not None else _keys.opaque_key(self._ns(namespace), name)
        return self._json("POST", f"/v1/blocks/{k.hex()}/replicas", {"count": count})["count"]

    def clear(self, namespace: str | None = None, *, regex: str | None = None) -> int:
        """Deletes every block of the namespace, or with ``regex`` only the
        objects whose name it matches anywhere (the node's RE2 syntax; one
        that does not compile raises BadRequest and deletes nothing);
        returns how many."""
        body = {"namespace": self._ns(namespace)}
        if regex is not None:
            body["regex"] = regex
        total = 0
        while True:
            res = self._json("POST", "/v1/namespaces/clear", body)
            total += res["deleted"]
            if not res.get("more"):
                return total

    def stats(self) -> dict:
        return self._json("GET", "/v1/stats")

    def healthy(self) -> bool:
        try:
            return self._json("GET", "/healthz").get("status") == "ok"
        except YuebingError:
            return False
