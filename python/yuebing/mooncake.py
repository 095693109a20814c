"""Mooncake Store's Python API on yuebing.

``MooncakeDistributedStore`` has the method names, argument order, return
conventions and error codes of ``mooncake.store.MooncakeDistributedStore``
(Mooncake's docs/source/python-api-reference/mooncake-store.md): calls
return 0 on success and Mooncake's negative ``ErrorCode`` values on failure,
``get`` returns ``b""`` on a miss, batch calls return one result per key.
Switching an engine over is a changed import::

    from yuebing.mooncake import MooncakeDistributedStore, ReplicateConfig

``setup``'s master address is the yuebing node's HTTP address. Objects are
stored as yuebing objects in one namespace (``"mooncake/default"``, or the
``namespace`` key of the config dict, or ``YUEBING_NAMESPACE``); the bearer
token comes from the config's ``token`` or ``YUEBING_TOKEN``. What has no
meaning here (RDMA devices, metadata server, segment sizes) is accepted and
ignored; docs/python.md lists every difference.
"""

from __future__ import annotations

import ctypes
import enum
import json
import math
import os
import re
import threading

from ._shm import MemfdBuffer, Staging
from .client import Client, Item
from .errors import (BadRequest, ChecksumMismatch, Conflict, ConnectionFailed, Forbidden, NoSpace, NotFound,
                     Overloaded, TooLarge, Unauthenticated, Unavailable, YuebingError)
from .keys import opaque_key


class ErrorCode(enum.IntEnum):
    """Mooncake Store's error codes (mooncake-store/include/types.h)."""

    OK = 0
    INTERNAL_ERROR = -1
    NOT_IMPLEMENTED = -2
    BUFFER_OVERFLOW = -10
    SEGMENT_NOT_FOUND = -101
    NO_AVAILABLE_HANDLE = -200
    INVALID_KEY = -400
    WRITE_FAIL = -500
    INVALID_PARAMS = -600
    ILLEGAL_CLIENT = -601
    INVALID_WRITE = -700
    INVALID_READ = -701
    REPLICA_IS_NOT_READY = -703
    OBJECT_NOT_FOUND = -704
    OBJECT_ALREADY_EXISTS = -705
    OBJECT_HAS_LEASE = -706
    LEASE_EXPIRED = -707
    TRANSFER_FAIL = -800
    RPC_FAIL = -900
    RPC_TIMEOUT = -901
    UNAVAILABLE_IN_CURRENT_STATUS = -1010


class SoftPinAction(enum.IntEnum):
    """What a put or upsert does to the object's soft pin."""

    PRESERVE = 0  # leave it as it is (a new object: pinned iff with_soft_pin)
    ENABLE = 1  # pin for soft_pin_ttl_ms
    DISABLE = 2  # release this store's pin


# Mooncake's default soft-pin TTL (master's default_kv_soft_pin_ttl).
DEFAULT_SOFT_PIN_TTL_MS = 30 * 60 * 1000
# A hard pin is a pin for the longest TTL a node allows by default
# (contexts.max_ttl): yuebing has no pin without a deadline.
HARD_PIN_TTL_S = 24 * 3600


_U64 = (1 << 64) - 1


def _unsigned(name: str, v, top: int = _U64) -> int:
    """pybind's conversion of a Python value to an unsigned C++ field: an
    int (bool included, as pybind takes it) in range, else TypeError."""
    if not isinstance(v, int) or v < 0 or v > top:
        raise TypeError(f"{name}: incompatible value {v!r} (want an integer in [0, {top}])")
    return int(v)


def _boolean(name: str, v) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"{name}: incompatible value {v!r} (want True or False)")
    return v


class ReplicateConfig:
    """Mooncake's ReplicateConfig. ``replica_num`` above 1 asks a yuebing
    cluster for that many copies (a node alone refuses it with
    INVALID_PARAMS); a soft pin is a yuebing context-cache pin of the
    object for ``soft_pin_ttl_ms``; ``preferred_segment(s)`` and
    ``prefer_alloc_in_same_node`` are accepted and ignored (the cluster
    places copies itself). Fields are checked on assignment as Mooncake's
    bindings check them: a value its C++ field cannot hold (a negative or
    over-64-bit TTL, a float count, a non-bool flag) raises TypeError.
    ``with_hard_pin`` puts the object in the node's ``pinned`` retention
    class, with no end, and a soft pin in ``high`` for its TTL
    (X-Yuebing-Retention, X-Yuebing-Retention-TTL); DISABLE puts it back
    in ``normal``. Mooncake has no priority field: these are its only
    retention requests."""

    _FIELDS = ("replica_num", "with_soft_pin", "with_hard_pin", "soft_pin_action", "soft_pin_ttl_ms",
               "preferred_segment", "preferred_segments", "prefer_alloc_in_same_node")

    def __init__(self):
        self.replica_num = 1
        self.with_soft_pin = False
        self.with_hard_pin = False
        self.soft_pin_action = SoftPinAction.PRESERVE
        self.soft_pin_ttl_ms: int | None = None
        self.preferred_segment = ""
        self.preferred_segments: list[str] = []
        self.prefer_alloc_in_same_node = False

    def __setattr__(self, name, v):
        if name == "replica_num":
            v = _unsigned(name, v)
        elif name in ("with_soft_pin", "with_hard_pin", "prefer_alloc_in_same_node"):
            v = _boolean(name, v)
        elif name == "soft_pin_ttl_ms":
            v = None if v is None else _unsigned(name, v)
        elif name == "soft_pin_action":
            try:
                v = SoftPinAction(v)
            except ValueError:
                raise TypeError(f"soft_pin_action: incompatible value {v!r}") from None
        elif name == "preferred_segment":
            if not isinstance(v, str):
                raise TypeError(f"preferred_segment: incompatible value {v!r} (want a str)")
        elif name == "preferred_segments":
            if isinstance(v, str) or not all(isinstance(x, str) for x in v):
                raise TypeError(f"preferred_segments: incompatible value {v!r} (want a list of str)")
            v = list(v)
        elif name not in self._FIELDS:
            # pybind classes without a __dict__ refuse new attributes.
            raise AttributeError(f"'ReplicateConfig' object has no attribute {name!r}")
        object.__setattr__(self, name, v)

    def retention(self) -> str | None:
        """The node's retention class this config asks for, if any."""
        if self.with_hard_pin:
            return "pinned"
        if self.soft_pin_action == SoftPinAction.DISABLE:
            return "normal"
        if self.with_soft_pin or self.soft_pin_action == SoftPinAction.ENABLE:
            # Mooncake: a zero TTL registers no pin.
            return None if self.soft_pin_ttl_ms == 0 else "high"
        return None

    def retention_ttl(self) -> int | None:
        """Seconds the class holds (a soft pin's TTL, rounded up), or None
        for a class without end."""
        if self.retention() != "high":
            return None
        ms = DEFAULT_SOFT_PIN_TTL_MS if self.soft_pin_ttl_ms is None else self.soft_pin_ttl_ms
        return max(1, math.ceil(ms / 1000))

    def __str__(self):
        return (f"ReplicateConfig(replica_num={self.replica_num}, with_soft_pin={self.with_soft_pin}, "
                f"with_hard_pin={self.with_hard_pin}, soft_pin_action={SoftPinAction(self.soft_pin_action).name}, "
                f"soft_pin_ttl_ms={self.soft_pin_ttl_ms}, preferred_segment={self.preferred_segment!r})")

    __repr__ = __str__


class BufferHandle(bytearray):
    """An object's bytes with Mooncake's BufferHandle methods: ``size()``,
    ``ptr()`` (the address, valid while the handle lives) and the buffer
    protocol (it is a bytearray)."""

    def size(self) -> int:
        return len(self)

    def ptr(self) -> int:
        if not len(self):
            return 0
        return ctypes.addressof((ctypes.c_char * len(self)).from_buffer(self))


# Memory from MooncakeHostMemAllocator: address -> its memfd buffer. The
# zero-copy calls of every store accept it as if registered, since that is
# what it is allocated for, and on this host the node writes it directly.
_allocated: dict[int, MemfdBuffer] = {}
_allocated_lock = threading.Lock()


def alloc_registrable(size: int) -> int:
    """The address of size bytes the node on this host can write directly
    (MooncakeHostMemAllocator().alloc): memory for register_buffer whose
    get_into and put_from move each block with one copy, the node's, and
    no staging segment between. 0 when it cannot be had."""
    return MooncakeHostMemAllocator().alloc(size)


def _memfd_of(ptr: int, size: int) -> tuple[MemfdBuffer, int] | None:
    """The allocator's buffer holding [ptr, ptr+size), and ptr's offset in
    it, or None."""
    with _allocated_lock:
        for base, b in _allocated.items():
            if base <= ptr and ptr + size <= base + b.size:
                return b, ptr - base
    return None


class MooncakeHostMemAllocator:
    """Mooncake's host-memory allocator: ``alloc(size)`` returns the
    address of size bytes of zeroed, page-aligned memory (0 when it cannot
    be had), ``free(ptr)`` gives it back (0, or INVALID_PARAMS for an
    address it did not hand out). The memory is usable with every store's
    zero-copy calls without ``register_buffer``. It is a sealed memfd: a
    node on this host maps it and reads and writes blocks there itself."""

    def __init__(self, use_hugepage: bool | None = None, hugepage_size=None):
        self.use_hugepage = bool(use_hugepage)  # accepted; the kernel decides (transparent huge pages)
        self.hugepage_size = hugepage_size

    def alloc(self, size: int) -> int:
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            return 0
        try:
            m = MemfdBuffer(size, "mooncake-host-mem")
        except (OSError, ValueError, OverflowError):
            return 0
        with _allocated_lock:
            _allocated[m.ptr] = m
        return m.ptr

    def free(self, ptr: int) -> int:
        with _allocated_lock:
            m = _allocated.pop(ptr, None)
        if m is None:
            return int(ErrorCode.INVALID_PARAMS)
        m.close()  # a view a caller kept keeps the mapping until it goes
        return 0


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(v) -> int:
    """A size as Mooncake's configs give it: an int, or "16MB", "16 MB",
    "512MiB", "1GB" (binary multiples, as Mooncake reads them)."""
    if isinstance(v, bool):
        raise ValueError(f"size {v!r}")
    if isinstance(v, int):
        if v < 0:
            raise ValueError(f"size {v}")
        return v
    m = _SIZE.match(str(v))
    if not m:
        raise ValueError(f"size {v!r}: want bytes or a number with KB, MB, GB or TB")
    unit = (m.group(2) or "").lower()
    return int(float(m.group(1)) * _UNITS[unit[:1] if unit else ""])


def _code(e: Exception) -> int:
    """Mooncake's code for an error of the native client."""
    if isinstance(e, NotFound):
        return ErrorCode.OBJECT_NOT_FOUND
    if isinstance(e, Conflict):
        return ErrorCode.OBJECT_ALREADY_EXISTS
    if isinstance(e, (NoSpace, Overloaded)):
        return ErrorCode.NO_AVAILABLE_HANDLE
    if isinstance(e, (Unauthenticated, Forbidden)):
        return ErrorCode.ILLEGAL_CLIENT
    if isinstance(e, ChecksumMismatch):
        return ErrorCode.TRANSFER_FAIL
    if isinstance(e, (BadRequest, TooLarge, ValueError, TypeError)):
        return ErrorCode.INVALID_PARAMS
    if isinstance(e, Unavailable):
        return ErrorCode.RPC_TIMEOUT if e.code == "timeout" else ErrorCode.RPC_FAIL
    if isinstance(e, (ConnectionFailed, OSError)):
        return ErrorCode.RPC_FAIL
    return ErrorCode.INTERNAL_ERROR


def _read_result(it) -> int:
    """Mooncake's result of one read of get_many_into: the bytes read, or
    a negative code."""
    if it.status == "missing":
        return ErrorCode.OBJECT_NOT_FOUND
    if it.error is not None:
        return _code(it.error)
    return it.size


def _len(x) -> int:
    """len of a list argument, -1 for anything without one."""
    try:
        return len(x)
    except TypeError:
        return -1


def _key_ok(key) -> bool:
    return isinstance(key, str) and 0 < len(key.encode()) <= 256


class MooncakeDistributedStore:
    """Mooncake Store's client API on a yuebing node. Safe for concurrent
    use from several threads once ``setup`` has returned."""

    def __init__(self):
        self._c: Client | None = None
        self._hostname = ""
        self._buffers: dict[int, int] = {}  # registered address -> size
        self._pins: dict[str, str] = {}  # key -> context id of its soft pin
        self._get_sessions: set[str] = set()  # keys of open get sessions
        self._put_sessions: dict[str, tuple[bytearray, ReplicateConfig | None]] = {}  # key -> (bytes, config)
        self._lock = threading.Lock()

    # -- setup ------------------------------------------------------------

    def setup(self, local_hostname, metadata_server=None, global_segment_size=16 << 20,
              local_buffer_size=16 << 20, protocol="tcp", rdma_devices="",
              master_server_addr="127.0.0.1:50051", transfer_engine=None, *, engine=None,
              tenant_id: str | None = None, **ignored) -> int:
        """Connects to the yuebing node at master_server_addr (its HTTP
        address, "host:port" or "http://host:port"). Mooncake's seven
        positional arguments, or one dict with the keys of Mooncake's JSON
        config (local_hostname, metadata_server, global_segment_size,
        local_buffer_size, protocol, device_name, master_server_address)
        plus yuebing's namespace, token and shm. Returns 0, or a negative
        code: INVALID_PARAMS for a bad argument, RPC_FAIL when the node
        does not answer. ``tenant_id`` names the namespace
        ("mooncake/<tenant_id>"); the keywords newer Mooncake releases take
        (enable_client_http_server, ssd_offload_path, ...) are accepted and
        ignored."""
        cfg: dict = {}
        if isinstance(local_hostname, dict):
            cfg = dict(local_hostname)
            local_hostname = cfg.get("local_hostname", "localhost")
            master_server_addr = cfg.get("master_server_address", cfg.get("master_server_addr", master_server_addr))
            global_segment_size = cfg.get("global_segment_size", global_segment_size)
            local_buffer_size = cfg.get("local_buffer_size", local_buffer_size)
            protocol = cfg.get("protocol", protocol)
        try:
            parse_size(global_segment_size)
            buf = parse_size(local_buffer_size)
        except ValueError:
            return ErrorCode.INVALID_PARAMS
        if not isinstance(local_hostname, str) or not isinstance(master_server_addr, str) or not master_server_addr:
            return ErrorCode.INVALID_PARAMS
        if str(protocol).lower() not in ("tcp", "rdma", "nvlink", "ascend", "cxl", "shm"):
            return ErrorCode.INVALID_PARAMS
        tenant = cfg.get("tenant_id", tenant_id)
        if tenant is not None and (not isinstance(tenant, str) or not tenant or "/" in tenant):
            return ErrorCode.INVALID_PARAMS
        ns = cfg.get("namespace") or (f"mooncake/{tenant}" if tenant else None) or \
            os.environ.get("YUEBING_NAMESPACE") or "mooncake/default"
        token = cfg.get("token") or os.environ.get("YUEBING_TOKEN") or None
        # The local buffer is Mooncake's staging area for the copying
        # calls; here it sizes the shared-memory segment.
        shm_size = min(max(buf, 16 << 20), 256 << 20)
        try:
            c = Client(master_server_addr, token=token, namespace=ns, shm=cfg.get("shm", "auto"), shm_size=shm_size)
            if not c.healthy():
                c.close()
                return ErrorCode.RPC_FAIL
        except YuebingError as e:
            return _code(e)
        except ValueError:
            return ErrorCode.INVALID_PARAMS
        old, self._c = self._c, c
        if old is not None:
            old.close()
        self._hostname = local_hostname
        return 0

    def setup_dummy(self, mem_pool_size, local_buffer_size, server_address) -> int:
        """Mooncake's client that talks to a store daemon on the same host:
        here server_address is the yuebing node's HTTP address, and the
        call is setup() with the two sizes."""
        return self.setup("localhost", "P2PHANDSHAKE", mem_pool_size, local_buffer_size, "tcp", "", server_address)

    def close(self) -> int:
        if self._c is not None:
            self._c.close()
            self._c = None
        return 0

    def get_hostname(self) -> str:
        return self._hostname

    def _client(self) -> Client:
        if self._c is None:
            raise ConnectionFailed(0, "not_setup", "call setup first")
        return self._c

    # -- pins ---------------------------------------------------------------

    @classmethod
    def _put_error(cls, config: ReplicateConfig | None) -> int:
        """_pin_error, and Mooncake's refusal of prefer_alloc_in_same_node
        by the calls that write one buffer per key (only the
        *_multi_buffers calls take it)."""
        if config is not None and getattr(config, "prefer_alloc_in_same_node", False):
            return ErrorCode.INVALID_PARAMS
        return cls._pin_error(config)

    @staticmethod
    def _pin_error(config: ReplicateConfig | None) -> int:
        """Mooncake's checks of a soft-pin request, made before anything is
        written: a TTL needs ENABLE (or with_soft_pin), and fits the
        longest pin a node grants by default."""
        if config is None:
            return 0
        try:
            action = SoftPinAction(config.soft_pin_action)
        except ValueError:
            return ErrorCode.INVALID_PARAMS
        enabling = action == SoftPinAction.ENABLE or (action == SoftPinAction.PRESERVE and (config.with_soft_pin or config.with_hard_pin))
        ttl = config.soft_pin_ttl_ms
        if ttl is not None and (not enabling or not isinstance(ttl, int) or ttl < 0 or ttl > HARD_PIN_TTL_S * 1000):
            return ErrorCode.INVALID_PARAMS
        return 0

    def _pin(self, keys: list[str], config: ReplicateConfig | None) -> int:
        """Applies config's soft-pin request to keys just written."""
        if config is None:
            return 0
        action = SoftPinAction(config.soft_pin_action)
        if action == SoftPinAction.PRESERVE and (config.with_soft_pin or config.with_hard_pin):
            action = SoftPinAction.ENABLE
        c = self._client()
        if action == SoftPinAction.DISABLE:
            for k in keys:
                with self._lock:
                    ctx = self._pins.pop(k, None)
                if ctx:
                    try:
                        c.delete_context(ctx)
                    except NotFound:
                        pass
            return 0
        if action != SoftPinAction.ENABLE:
            return 0
        if config.with_hard_pin:
            ttl = HARD_PIN_TTL_S
        else:
            ms = DEFAULT_SOFT_PIN_TTL_MS if config.soft_pin_ttl_ms is None else int(config.soft_pin_ttl_ms)
            if ms == 0:
                return 0  # Mooncake: a zero TTL registers no pin
            ttl = max(1, math.ceil(ms / 1000))
        ctx = c.create_context(ttl, names=keys)["id"]
        old = []
        with self._lock:
            for k in keys:
                if k in self._pins:
                    old.append(self._pins[k])
                self._pins[k] = ctx
        for o in set(old):
            try:
                c.delete_context(o)
            except (NotFound, YuebingError):
                pass
        return 0

    @classmethod
    def _put_opts(cls, config: ReplicateConfig | None) -> dict:
        """The native client's put options for config: its replica count
        and its retention class."""
        if not isinstance(config, ReplicateConfig):
            return {"replicas": cls._replicas(config), "retention": None, "retention_ttl": None}
        return {"replicas": cls._replicas(config), "retention": config.retention(), "retention_ttl": config.retention_ttl()}

    @staticmethod
    def _replicas(config: ReplicateConfig | None) -> int | None:
        if config is None or config.replica_num in (None, 0, 1):
            return None
        if not isinstance(config.replica_num, int) or config.replica_num < 0:
            raise BadRequest(0, "bad_request", f"replica_num {config.replica_num!r}")
        return config.replica_num

    # -- put ------------------------------------------------------------------

    def put(self, key: str, value, config: ReplicateConfig | None = None) -> int:
        """Stores value (bytes-like) under key. An existing key is kept as
        it is and the put succeeds (objects are immutable; see upsert)."""
        if not _key_ok(key) or self._put_error(config):
            return ErrorCode.INVALID_PARAMS
        try:
            if len(memoryview(value)) == 0:
                return ErrorCode.INVALID_PARAMS
            self._client().put(key, value, **self._put_opts(config))
            return self._pin([key], config)
        except (YuebingError, ValueError, TypeError) as e:
            return _code(e)

    def put_parts(self, key: str, *parts, config: ReplicateConfig | None = None) -> int:
        """Stores the parts joined; parts of no bytes at all store nothing
        and succeed, as in Mooncake."""
        try:
            value = b"".join(memoryview(p).cast("B") for p in parts)
            if not value and _key_ok(key) and not self._put_error(config):
                return 0
            return self.put(key, value, config)
        except (ValueError, TypeError):
            return ErrorCode.INVALID_PARAMS

    def upsert(self, key: str, value, config: ReplicateConfig | None = None) -> int:
        """Stores value under key, replacing what is there. Not atomic: a
        reader in between may miss the key (never sees a mix)."""
        if not _key_ok(key) or self._pin_error(config):
            return ErrorCode.INVALID_PARAMS
        try:
            c = self._client()
            c.delete(key)
            c.put(key, value, **self._put_opts(config))
            return self._pin([key], config)
        except (YuebingError, ValueError, TypeError) as e:
            return _code(e)

    def upsert_parts(self, key: str, *parts, config: ReplicateConfig | None = None) -> int:
        """upsert of the parts joined."""
        try:
            value = b"".join(memoryview(p).cast("B") for p in parts)
        except (ValueError, TypeError):
            return ErrorCode.INVALID_PARAMS
        return self.upsert(key, value, config)

    def upsert_batch(self, keys, values, config: ReplicateConfig | None = None) -> int:
        """upsert of each value; 0 when all succeeded, else the first
        failed key's code (the others are still written)."""
        keys, values = list(keys), list(values)
        if len(keys) != len(values) or not all(_key_ok(k) for k in keys) or self._pin_error(config):
            return ErrorCode.INVALID_PARAMS
        codes = [self.upsert(k, v, config) for k, v in zip(keys, values)]
        return next((c for c in codes if c), 0)

    def put_batch(self, keys, values, config: ReplicateConfig | None = None) -> int:
        """Stores each value; 0 when all succeeded, else the first key's
        error code (the others are still stored)."""
        keys, values = list(keys), list(values)
        if len(keys) != len(values) or not all(_key_ok(k) for k in keys) or self._put_error(config):
            return ErrorCode.INVALID_PARAMS
        if not keys:
            return 0
        try:
            items = self._client().put_many(keys, values, **self._put_opts(config))
        except (YuebingError, ValueError, TypeError) as e:
            return _code(e)
        for it in items:
            if it.error is not None:
                return _code(it.error)
        try:
            return self._pin(keys, config)
        except YuebingError as e:
            return _code(e)

    # -- get ------------------------------------------------------------------

    def get(self, key: str) -> bytes:
        """The value, or b"" when the key is missing or the read fails."""
        if not _key_ok(key):
            return b""
        try:
            return self._client().get(key)
        except YuebingError:
            return b""

    def get_batch(self, keys) -> list[bytes]:
        keys = list(keys)
        if not keys:
            return []
        if not all(_key_ok(k) for k in keys):
            return [b""] * len(keys)
        try:
            return [v if v is not None else b"" for v in self._client().get_many(keys)]
        except YuebingError:
            return [b""] * len(keys)

    def get_buffer(self, key: str) -> BufferHandle | None:
        r = self.batch_get_buffer([key])
        return r[0] if r else None

    def batch_get_buffer(self, keys) -> list[BufferHandle | None]:
        """One BufferHandle per key, None for a missing one."""
        keys = list(keys)
        if not keys:
            return []
        if not all(_key_ok(k) for k in keys):
            return [None] * len(keys)
        try:
            vals = self._client().get_many(keys)
        except YuebingError:
            return [None] * len(keys)
        return [BufferHandle(v) if v is not None else None for v in vals]

    def get_size(self, key: str) -> int:
        """The object's size, or a negative code (OBJECT_NOT_FOUND)."""
        if not _key_ok(key):
            return ErrorCode.INVALID_PARAMS
        try:
            return self._client().size(key)
        except YuebingError as e:
            return _code(e)

    def is_exist(self, key: str) -> int:
        """1 if the key exists, 0 if not, -1 on an error."""
        if not _key_ok(key):
            return -1
        try:
            return 1 if self._client().exists(key) else 0
        except YuebingError:
            return -1

    def batch_is_exist(self, keys) -> list[int]:
        keys = list(keys)
        if not keys:
            return []
        out = [-1] * len(keys)
        good = [i for i, k in enumerate(keys) if _key_ok(k)]
        if good:
            try:
                ex = self._client().exists_many([keys[i] for i in good])
                for i, e in zip(good, ex):
                    out[i] = 1 if e else 0
            except YuebingError:
                pass
        return out

    # -- remove ---------------------------------------------------------------

    def remove(self, key: str, force: bool = False) -> int:
        """0, or OBJECT_NOT_FOUND when the key is not stored."""
        if not _key_ok(key):
            return ErrorCode.INVALID_PARAMS
        try:
            if not self._client().delete(key):
                return ErrorCode.OBJECT_NOT_FOUND
            self._unpin(key)
            return 0
        except YuebingError as e:
            return _code(e)

    def batch_remove(self, keys, force: bool = False) -> list[int]:
        return [self.remove(k, force) for k in keys]

    def remove_by_regex(self, regex_pattern: str, force: bool = False) -> int:
        """Removes every object of this store's namespace whose key the
        regular expression matches anywhere (Mooncake's regex_search);
        returns how many, or a negative code: INVALID_PARAMS for a pattern
        the node cannot compile (nothing is removed). The node matches with
        Go's RE2, which has no backreferences or lookaround."""
        if not isinstance(regex_pattern, str):
            return ErrorCode.INVALID_PARAMS
        try:
            # An empty pattern matches every key; "" would mean no filter
            # to the node, which also clears blocks stored by chained key.
            n = self._client().clear(regex=regex_pattern or "^")
        except YuebingError as e:
            return _code(e)
        try:
            rx = re.compile(regex_pattern)
        except re.error:
            # RE2 syntax Python lacks: the removed keys' pins stay until
            # their TTL, pinning nothing.
            return n
        with self._lock:
            gone = [k for k in self._pins if rx.search(k)]
        for k in gone:
            self._unpin(k)
        return n

    def remove_all(self, force: bool = False) -> int:
        """Removes every object of this store's namespace; returns how many,
        or a negative code. force is accepted: nothing here holds a lease
        that would keep an object."""
        try:
            n = self._client().clear()
        except YuebingError as e:
            return _code(e)
        with self._lock:
            pins, self._pins = set(self._pins.values()), {}
        for ctx in pins:
            try:
                self._client().delete_context(ctx)
            except YuebingError:
                pass
        return n

    def _unpin(self, key: str) -> None:
        with self._lock:
            ctx = self._pins.pop(key, None)
            shared = ctx is not None and ctx in self._pins.values()
        if ctx and not shared:
            try:
                self._client().delete_context(ctx)
            except YuebingError:
                pass

    # -- registered buffers -------------------------------------------------

    def register_buffer(self, buffer_ptr: int, size: int) -> int:
        """Registers memory for the zero-copy calls; 0, or INVALID_PARAMS."""
        if not isinstance(buffer_ptr, int) or not isinstance(size, int) or buffer_ptr <= 0 or size <= 0:
            return ErrorCode.INVALID_PARAMS
        with self._lock:
            self._buffers[buffer_ptr] = max(size, self._buffers.get(buffer_ptr, 0))
        return 0

    def unregister_buffer(self, buffer_ptr: int) -> int:
        with self._lock:
            if self._buffers.pop(buffer_ptr, None) is None:
                return ErrorCode.INVALID_PARAMS
        return 0

    def _view(self, ptr, size) -> memoryview:
        """A writable view of [ptr, ptr+size), which must lie inside a
        registered buffer: an unregistered address is refused rather than
        read or written."""
        if not isinstance(ptr, int) or not isinstance(size, int) or size <= 0:
            raise BadRequest(0, "bad_request", f"buffer {ptr!r} of {size!r} bytes")
        with self._lock:
            ok = any(base <= ptr and ptr + size <= base + n for base, n in self._buffers.items())
        if not ok:
            with _allocated_lock:
                ok = any(base <= ptr and ptr + size <= base + m.size for base, m in _allocated.items())
        if not ok:
            raise BadRequest(0, "bad_request", f"[{ptr:#x}, +{size}) is not inside a registered buffer")
        return memoryview((ctypes.c_char * size).from_address(ptr)).cast("B")

    # -- zero copy ------------------------------------------------------------

    def put_from(self, key: str, buffer_ptr: int, size: int, config: ReplicateConfig | None = None) -> int:
        """Stores size bytes at buffer_ptr (inside a registered buffer);
        size 0 stores nothing and succeeds, as in Mooncake."""
        if not _key_ok(key) or self._put_error(config):
            return ErrorCode.INVALID_PARAMS
        if size == 0 and isinstance(buffer_ptr, int):
            return 0
        if self._staging() is not None and isinstance(buffer_ptr, int) and isinstance(size, int) and \
                _memfd_of(buffer_ptr, size) is not None:
            return self._puts([key], [[buffer_ptr]], [[size]], config)[0]
        try:
            self._client().put(key, self._view(buffer_ptr, size), **self._put_opts(config))
            return self._pin([key], config)
        except (YuebingError, ValueError, TypeError) as e:
            return _code(e)

    def upsert_from(self, key: str, buffer_ptr: int, size: int, config: ReplicateConfig | None = None) -> int:
        try:
            mv = self._view(buffer_ptr, size)
        except YuebingError as e:
            return _code(e)
        return self.upsert(key, mv, config)

    def batch_upsert_from(self, keys, buffer_ptrs, sizes, config: ReplicateConfig | None = None) -> list[int]:
        """upsert_from of each range; one code per key, mismatched lengths
        fail every key."""
        keys, ptrs, sizes = list(keys), list(buffer_ptrs), list(sizes)
        if not (len(keys) == len(ptrs) == len(sizes)) or self._pin_error(config):
            return [int(ErrorCode.INVALID_PARAMS)] * len(keys)
        return [int(self.upsert_from(k, p, n, config)) for k, p, n in zip(keys, ptrs, sizes)]

    def put_from_with_metadata(self, key: str, buffer_ptr: int, metadata_buffer_ptr: int, size: int,
                               metadata_size: int, config: ReplicateConfig | None = None) -> int:
        """Stores the metadata range, then the data range, as one object
        (Mooncake's order); both must lie in registered memory."""
        if not _key_ok(key) or self._put_error(config):
            return ErrorCode.INVALID_PARAMS
        return self._puts([key], [[metadata_buffer_ptr, buffer_ptr]], [[metadata_size, size]], config)[0]

    def get_into(self, key: str, buffer_ptr: int, size: int) -> int:
        """Reads the object into the buffer; the bytes read, or a negative
        code (OBJECT_NOT_FOUND; INVALID_PARAMS when it does not fit)."""
        if not _key_ok(key):
            return ErrorCode.INVALID_PARAMS
        if self._staging() is not None and isinstance(buffer_ptr, int) and isinstance(size, int) and \
                _memfd_of(buffer_ptr, size) is not None:
            return self._gets([key], [buffer_ptr], [size], [None])[0]
        try:
            return self._client().get_into(key, self._view(buffer_ptr, size))
        except (YuebingError, ValueError, TypeError) as e:
            return _code(e)

    def batch_put_from(self, keys, buffer_ptrs, sizes, config: ReplicateConfig | None = None) -> list[int]:
        """One code per key; mismatched lengths fail every key."""
        keys, ptrs, sizes = list(keys), list(buffer_ptrs), list(sizes)
        if not (len(keys) == len(ptrs) == len(sizes)) or self._put_error(config):
            return [int(ErrorCode.INVALID_PARAMS)] * len(keys)
        return self._puts(keys, [[p] for p in ptrs], [[n] for n in sizes], config)

    def batch_put_from_multi_buffers(self, keys, all_buffer_ptrs, all_sizes,
                                     config: ReplicateConfig | None = None) -> list[int]:
        """Stores each object from several buffers, its bytes the buffers'
        in order (the layout Mooncake's vLLM connector writes: one buffer
        per layer of a block). One code per key; lengths that do not match,
        at either level, fail every key."""
        keys, ptrs, sizes = list(keys), list(all_buffer_ptrs), list(all_sizes)
        if not (len(keys) == len(ptrs) == len(sizes)) or self._pin_error(config) or \
                any(_len(p) != _len(n) for p, n in zip(ptrs, sizes)):
            return [int(ErrorCode.INVALID_PARAMS)] * len(keys)
        return self._puts(keys, ptrs, sizes, config)

    def _joined(self, ptrs, sizes):
        """The bytes of the ranges, in order: a view of the one range, or
        one copy joining several (the socket takes one body per key)."""
        views = [self._view(p, n) for p, n in zip(ptrs, sizes) if n != 0]
        if not views:
            raise BadRequest(0, "bad_request", "no bytes to store")
        return views[0] if len(views) == 1 else b"".join(views)

    def _puts(self, keys, ptrs, sizes, config) -> list[int]:
        out = [0] * len(keys)
        pending, views = [], []
        opts = self._put_opts(config)
        # Shared memory carries no retention class: those puts go by HTTP.
        st = self._staging() if opts["retention"] is None else None
        direct = []
        for i, k in enumerate(keys):
            try:
                if not _key_ok(k):
                    raise BadRequest(0, "bad_request", f"key {k!r}")
                if all(n == 0 for n in sizes[i]) and all(isinstance(p, int) for p in ptrs[i]):
                    continue  # nothing to store: Mooncake's no-op
                v = self._joined(ptrs[i], sizes[i])
                d = self._region(st, ptrs[i][0], len(v)) if st is not None and len(ptrs[i]) == 1 else None
                if d is not None:
                    direct.append((i, d[0], d[1], v))
                else:
                    views.append(v)
                    pending.append(i)
            except YuebingError as e:
                out[i] = _code(e)
        if direct:
            self._direct(st, "put", keys, direct, [None] * len(keys), out, opts["replicas"])
            pinned = [keys[i] for i, _, _, _ in direct if out[i] == 0]
            if pinned:
                try:
                    rc = self._pin(pinned, config)
                except YuebingError as e:
                    rc = _code(e)
                for i, _, _, _ in direct:
                    if rc and out[i] == 0:
                        out[i] = rc
        if pending:
            try:
                items = self._client().put_many([keys[i] for i in pending], views, **opts)
                for i, it in zip(pending, items):
                    out[i] = _code(it.error) if it.error is not None else 0
                pinned = [keys[i] for i in pending if out[i] == 0]
                if pinned:
                    rc = self._pin(pinned, config)
                    if rc:
                        for i in pending:
                            if out[i] == 0:
                                out[i] = rc
            except YuebingError as e:
                for i in pending:
                    out[i] = _code(e)
        return [int(x) for x in out]

    def batch_get_into(self, keys, buffer_ptrs, sizes) -> list[int]:
        """Bytes read per key, or its negative code; mismatched lengths
        fail every key."""
        keys, ptrs, sizes = list(keys), list(buffer_ptrs), list(sizes)
        if not (len(keys) == len(ptrs) == len(sizes)):
            return [int(ErrorCode.INVALID_PARAMS)] * len(keys)
        return self._gets(keys, ptrs, sizes, [None] * len(keys))

    # Bytes of scratch one batch_get_into_multi_buffers call holds at once
    # to scatter objects into several buffers each.
    SCATTER_BYTES = 64 << 20

    def batch_get_into_multi_buffers(self, keys, all_buffer_ptrs, all_sizes,
                                     prefer_alloc_in_same_node: bool = False) -> list[int]:
        """Reads each object across its buffers in order (the inverse of
        batch_put_from_multi_buffers): the object's size per key, or a
        negative code (OBJECT_NOT_FOUND; INVALID_PARAMS when the buffers
        together are smaller than the object, which then writes nothing).
        Lengths that do not match fail every key. A key read into several
        buffers goes through a scratch copy so its checksum is verified
        before a byte reaches them."""
        keys, ptrs, sizes = list(keys), list(all_buffer_ptrs), list(all_sizes)
        bad = int(ErrorCode.INVALID_PARAMS)
        if not (len(keys) == len(ptrs) == len(sizes)) or any(_len(p) != _len(n) for p, n in zip(ptrs, sizes)):
            return [bad] * len(keys)
        out = [0] * len(keys)
        plan = []  # (index, target view, the fragment views it scatters to, or None)
        for i, k in enumerate(keys):
            try:
                if not _key_ok(k):
                    raise BadRequest(0, "bad_request", f"key {k!r}")
                frags = [self._view(p, n) for p, n in zip(ptrs[i], sizes[i]) if n != 0]
                if not frags:
                    raise BadRequest(0, "bad_request", "no buffer to read into")
                plan.append((i, frags[0], None) if len(frags) == 1 else (i, None, frags))
            except YuebingError as e:
                out[i] = _code(e)
        c = None
        start = 0
        while start < len(plan):
            # A run of keys whose scratch fits SCATTER_BYTES (at least one).
            end, held = start, 0
            while end < len(plan):
                need = sum(len(f) for f in plan[end][2]) if plan[end][2] else 0
                if end > start and held + need > self.SCATTER_BYTES:
                    break
                held += need
                end += 1
            run = plan[start:end]
            start = end
            targets = [t if t is not None else memoryview(bytearray(sum(len(f) for f in frags))) for _, t, frags in run]
            try:
                c = c or self._client()
                items = c.get_many_into([keys[i] for i, _, _ in run], targets)
            except YuebingError as e:
                for i, _, _ in run:
                    out[i] = _code(e)
                continue
            for (i, _, frags), t, it in zip(run, targets, items):
                out[i] = _read_result(it)
                if out[i] > 0 and frags:
                    off = 0
                    for f in frags:
                        n = min(len(f), it.size - off)
                        if n <= 0:
                            break
                        f[:n] = t[off:off + n]
                        off += n
        return [int(x) for x in out]

    def _gets(self, keys, ptrs, sizes, froms) -> list[int]:
        out = [0] * len(keys)
        pending, views = [], []
        st = self._staging()
        direct = []
        for i, (k, p, n) in enumerate(zip(keys, ptrs, sizes)):
            try:
                if not _key_ok(k):
                    raise BadRequest(0, "bad_request", f"key {k!r}")
                v = self._view(p, n)
                d = self._region(st, p, n) if st is not None else None
                if d is not None:
                    direct.append((i, d[0], d[1], v))
                else:
                    views.append(v)
                    pending.append(i)
            except YuebingError as e:
                out[i] = _code(e)
        if direct:
            self._direct(st, "get", keys, direct, froms, out)
        if pending:
            try:
                items = self._client().get_many_into([keys[i] for i in pending], views, offsets=[froms[i] for i in pending])
                for i, it in zip(pending, items):
                    out[i] = _read_result(it)
            except YuebingError as e:
                for i in pending:
                    out[i] = _code(e)
        return [int(x) for x in out]

    # -- sessions -------------------------------------------------------------
    #
    # Mooncake's sessions split a batch into a start (the master is asked
    # once), ranged transfers, and an end. A get session here checks the
    # keys at its start and reads ranges with the node's ranged reads; a
    # put session assembles each object in this process's memory, since a
    # yuebing object is written in one put, and stores them at its end:
    # until then no reader sees them, as in Mooncake.

    def batch_get_session_start(self, keys) -> list[int]:
        """Opens a get session for each key: 0, or OBJECT_NOT_FOUND (or
        another negative code) for a key that cannot be read."""
        keys = list(keys)
        out = [int(ErrorCode.INVALID_PARAMS)] * len(keys)
        good = [i for i, k in enumerate(keys) if _key_ok(k)]
        if good:
            try:
                ex = self._client().exists_many([keys[i] for i in good])
                for i, e in zip(good, ex):
                    out[i] = 0 if e else int(ErrorCode.OBJECT_NOT_FOUND)
            except YuebingError as e:
                for i in good:
                    out[i] = int(_code(e))
        with self._lock:
            for k, c in zip(keys, out):
                if c == 0:
                    self._get_sessions.add(k)
                elif isinstance(k, str):
                    self._get_sessions.discard(k)
        return out

    def batch_get_into_multi_buffer_ranges(self, keys, all_buffer_ptrs, all_sizes, all_src_offsets) -> list[int]:
        """Reads, for each key of an open get session, sizes[j] bytes from
        offset src_offsets[j] of the object into buffer j: the bytes read
        per key, or a negative code (INVALID_PARAMS without a session, for
        a shape that does not match or a range past the object's end)."""
        keys, ptrs, sizes, offs = list(keys), list(all_buffer_ptrs), list(all_sizes), list(all_src_offsets)
        bad = int(ErrorCode.INVALID_PARAMS)
        out = [bad] * len(keys)
        if not (len(keys) == len(ptrs) == len(sizes) == len(offs)):
            return out
        with self._lock:
            open_ = set(self._get_sessions)
        flat_k, flat_p, flat_n, flat_f, owner = [], [], [], [], []
        for i, k in enumerate(keys):
            p, n, f = ptrs[i], sizes[i], offs[i]
            if k not in open_ or not (_len(p) == _len(n) == _len(f)) or _len(p) <= 0 or \
                    any(not isinstance(x, int) or x < 0 for x in list(n) + list(f)):
                continue
            out[i] = 0
            for pj, nj, fj in zip(p, n, f):
                if nj == 0:
                    continue
                flat_k.append(k)
                flat_p.append(pj)
                flat_n.append(nj)
                flat_f.append(fj)
                owner.append(i)
        if flat_k:
            for i, r in zip(owner, self._gets(flat_k, flat_p, flat_n, flat_f)):
                if out[i] < 0:
                    continue
                out[i] = r if r < 0 else out[i] + r
        return out

    def batch_get_session_end(self, keys) -> int:
        """Closes the keys' get sessions; 0."""
        with self._lock:
            for k in keys:
                self._get_sessions.discard(k)
        return 0

    def batch_put_session_start(self, keys, sizes, config: ReplicateConfig | None = None) -> list[int]:
        """Opens a put session for each key, an object of sizes[i] bytes
        that no reader sees until batch_put_session_end: 0, or
        INVALID_PARAMS (a bad key, a size of 0 or over the node's block
        limit, lists that do not match)."""
        keys, sizes = list(keys), list(sizes)
        bad = int(ErrorCode.INVALID_PARAMS)
        if len(keys) != len(sizes) or self._put_error(config):
            return [bad] * len(keys)
        out = []
        with self._lock:
            for k, n in zip(keys, sizes):
                if not _key_ok(k) or not isinstance(n, int) or not 0 < n <= self.MAX_SESSION_OBJECT:
                    out.append(bad)
                    continue
                self._put_sessions[k] = (bytearray(n), config)
                out.append(0)
        return out

    # The largest object a put session assembles: the node's default
    # limits.max_block_size, which refuses anything larger at the end.
    MAX_SESSION_OBJECT = 256 << 20

    def batch_put_from_multi_buffer_ranges(self, keys, all_buffer_ptrs, all_sizes, all_dst_offsets) -> list[int]:
        """Copies, for each key of an open put session, sizes[j] bytes of
        registered buffer j to offset dst_offsets[j] of the object: the
        bytes copied per key, or INVALID_PARAMS (no session, a shape that
        does not match, a range past the object's end or outside
        registered memory: nothing of that key is copied)."""
        keys, ptrs, sizes, offs = list(keys), list(all_buffer_ptrs), list(all_sizes), list(all_dst_offsets)
        bad = int(ErrorCode.INVALID_PARAMS)
        out = [bad] * len(keys)
        if not (len(keys) == len(ptrs) == len(sizes) == len(offs)):
            return out
        for i, k in enumerate(keys):
            with self._lock:
                sess = self._put_sessions.get(k) if isinstance(k, str) else None
            p, n, f = ptrs[i], sizes[i], offs[i]
            if sess is None or not (_len(p) == _len(n) == _len(f)) or _len(p) <= 0:
                continue
            obj = sess[0]
            try:
                views = [(self._view(pj, nj), fj) for pj, nj, fj in zip(p, n, f) if nj != 0]
            except YuebingError:
                continue
            if any(not isinstance(fj, int) or fj < 0 or fj + len(v) > len(obj) for v, fj in views):
                continue
            for v, fj in views:
                obj[fj:fj + len(v)] = v
            out[i] = sum(len(v) for v, _ in views)
        return out

    def batch_put_session_end(self, keys) -> list[int]:
        """Stores each key's assembled object and closes its session: 0 or
        a negative code per key (INVALID_PARAMS without a session)."""
        keys = list(keys)
        out = [int(ErrorCode.INVALID_PARAMS)] * len(keys)
        groups: dict[int, tuple[ReplicateConfig | None, list[int], list[bytearray]]] = {}
        with self._lock:
            for i, k in enumerate(keys):
                sess = self._put_sessions.pop(k, None) if isinstance(k, str) else None
                if sess is not None:
                    g = groups.setdefault(id(sess[1]), (sess[1], [], []))
                    g[1].append(i)
                    g[2].append(sess[0])
        for config, idx, vals in groups.values():
            for i, c in zip(idx, self._put_values([keys[i] for i in idx], vals, config)):
                out[i] = c
        return out

    def batch_put_session_revoke(self, keys) -> list[int]:
        """Drops the keys' put sessions, storing nothing: 0 per key, or
        INVALID_PARAMS for a key without one."""
        out = []
        with self._lock:
            for k in keys:
                gone = self._put_sessions.pop(k, None) if isinstance(k, str) else None
                out.append(0 if gone is not None else int(ErrorCode.INVALID_PARAMS))
        return out

    # -- the node writes registered memory itself ------------------------

    # Items in one request on the session's socket: well under the node's
    # limits.max_batch_keys (default 1024).
    DIRECT_BATCH = 256

    def _staging(self) -> Staging | None:
        """The client's shared-memory session, when it has one."""
        c = self._c
        return c._usable_shm() if c is not None else None

    @staticmethod
    def _region(st: Staging, ptr: int, size: int) -> tuple[int, int] | None:
        """(the node's region id, offset) of [ptr, ptr+size) when it lies
        in memory from MooncakeHostMemAllocator that the node maps (it is
        registered with the session on first use), else None: the call
        then goes through the staging segment or the socket, as for any
        registered buffer."""
        m = _memfd_of(ptr, size)
        if m is None:
            return None
        try:
            return st.register(m[0]), m[1]
        except YuebingError:
            return None

    def _direct(self, st: Staging, op: str, keys, direct, froms, out, replicas=None) -> None:
        """Gets into or puts from registered regions: the node copies
        between its store and the caller's memory, nothing in between.
        direct holds (index, region, offset, view); out gets each code (a
        get's bytes read). A get whose bytes fail their checksum is an
        error, as on every path."""
        c = self._client()
        ns = c._ns(None)
        for start in range(0, len(direct), self.DIRECT_BATCH):
            run = direct[start:start + self.DIRECT_BATCH]
            items = []
            for i, rid, off, mv in run:
                it = {"name": keys[i], "region": rid, "offset": off, "length": len(mv)}
                if froms[i] is not None:
                    it["from"] = froms[i]
                items.append(it)
            payload = {"op": op, "namespace": ns, "items": items}
            if replicas:
                payload["replicas"] = replicas
            try:
                res = st.call(payload)["results"]
            except YuebingError as e:
                for i, _, _, _ in run:
                    out[i] = _code(e)
                continue
            for (i, _, _, mv), x in zip(run, res):
                it = c._item(x)
                if op == "put":
                    out[i] = _code(it.error) if it.error is not None else 0
                    continue
                if it.status == "ok" and froms[i] is None:
                    try:
                        c._check(mv[:it.size], x.get("crc32c"))
                    except ChecksumMismatch as e:
                        it = Item(it.key, "error", error=e)
                out[i] = _read_result(it)

    def get_into_ranges(self, buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets, all_sizes) -> list:
        """Mooncake's buffer-major ranged read: results[i][j][k] is the
        bytes read for fragment k of key j into buffer i, or a negative
        code. Shapes that do not match fail the entries they cover."""
        bad = int(ErrorCode.INVALID_PARAMS)
        n = len(buffer_ptrs)
        if not (len(all_keys) == len(all_dst_offsets) == len(all_src_offsets) == len(all_sizes) == n):
            return [[[bad] * max(1, len(f)) for f in (ks if isinstance(ks, (list, tuple)) else [])] for ks in all_keys]
        with self._lock:
            bufs = list(self._buffers.items())
        with _allocated_lock:
            bufs += [(b, m.size) for b, m in _allocated.items()]
        results: list = []
        flat_keys, flat_ptrs, flat_sizes, flat_froms, where = [], [], [], [], []
        for i in range(n):
            ks, dsts, srcs, szs = all_keys[i], all_dst_offsets[i], all_src_offsets[i], all_sizes[i]
            row: list = []
            results.append(row)
            if not (len(ks) == len(dsts) == len(srcs) == len(szs)):
                row.extend([[bad] * max(1, len(d) if isinstance(d, (list, tuple)) else 1) for d in dsts] or [[bad]])
                continue
            base = buffer_ptrs[i]
            # Room from base to the end of the registered buffer it lies in.
            cap = next((b + n - base for b, n in bufs if isinstance(base, int) and b <= base < b + n), None)
            for j, k in enumerate(ks):
                d, s, z = dsts[j], srcs[j], szs[j]
                if not (len(d) == len(s) == len(z)):
                    row.append([bad] * max(len(d), len(s), len(z), 1))
                    continue
                frag = []
                for m in range(len(d)):
                    if cap is None or d[m] < 0 or s[m] < 0 or z[m] <= 0 or d[m] + z[m] > cap:
                        frag.append(bad)
                        continue
                    frag.append(None)
                    flat_keys.append(k)
                    flat_ptrs.append(base + d[m])
                    flat_sizes.append(z[m])
                    flat_froms.append(s[m])
                    where.append((i, j, m))
                row.append(frag)
        if flat_keys:
            got = self._gets(flat_keys, flat_ptrs, flat_sizes, flat_froms)
            for (i, j, m), r in zip(where, got):
                results[i][j][m] = r
        return results

    # -- health and replicas ------------------------------------------------

    def health_check(self) -> int:
        """0 when the node answers /healthz, else a negative code
        (RPC_FAIL; INVALID_PARAMS before setup)."""
        if self._c is None:
            return ErrorCode.INVALID_PARAMS
        try:
            return 0 if self._c.healthy() else ErrorCode.RPC_FAIL
        except YuebingError as e:
            return _code(e)

    def get_replica_desc(self, key: str) -> list[ReplicaDesc]:
        """The copies of key: one ReplicaDesc per node holding it in a
        cluster, the node's own copy otherwise; [] for a missing key or a
        failed lookup."""
        return self.batch_get_replica_desc([key]).get(key, [])

    def batch_get_replica_desc(self, keys) -> dict[str, list[ReplicaDesc]]:
        keys = list(keys)
        out: dict[str, list[ReplicaDesc]] = {k: [] for k in keys}
        good = [k for k in keys if _key_ok(k)]
        if not good:
            return out
        c = self._client()
        try:
            holders = c.holders(good)
        except YuebingError:
            holders = None  # no cluster (or no admin right): this node's own copy
        for i, k in enumerate(good):
            if holders is not None and holders[i]:
                out[k] = [ReplicaDesc(h.get("name", ""), h.get("tiers") or []) for h in holders[i]]
                continue
            try:
                tier = c.tier(k)
            except YuebingError:
                continue
            out[k] = [ReplicaDesc("", [tier] if tier else [])]
        return out

    # -- tensors ------------------------------------------------------------
    #
    # Objects in Mooncake's tensor format (_tensor.py): its 304-byte
    # TensorMetadata, then the bytes. The tensor-parallel calls store a
    # tensor as tp_size equal shards along split_dim, under
    # "<key>_tp_<rank>" with a shard header, and read back one rank's
    # shard; with tp_size 1 they are the plain calls on key itself.

    @staticmethod
    def _tp_key(key: str, rank: int) -> str:
        return f"{key}_tp_{rank}"

    def _put_values(self, keys, values, config: ReplicateConfig | None) -> list[int]:
        """Stores values[i] (bytes, or an int code for an item that failed
        already) under keys[i]; one code per key."""
        out = [int(v) if isinstance(v, int) else 0 for v in values]
        if self._pin_error(config):
            return [int(ErrorCode.INVALID_PARAMS)] * len(keys)
        todo = [i for i, v in enumerate(values) if not isinstance(v, int)]
        for i in todo:
            if not _key_ok(keys[i]):
                out[i] = int(ErrorCode.INVALID_PARAMS)
        todo = [i for i in todo if out[i] == 0]
        if not todo:
            return out
        try:
            items = self._client().put_many([keys[i] for i in todo], [values[i] for i in todo], **self._put_opts(config))
            for i, it in zip(todo, items):
                out[i] = int(_code(it.error)) if it.error is not None else 0
            ok = [keys[i] for i in todo if out[i] == 0]
            rc = self._pin(ok, config) if ok else 0
            if rc:
                for i in todo:
                    out[i] = out[i] or int(rc)
        except YuebingError as e:
            for i in todo:
                out[i] = int(_code(e))
        return out

    @staticmethod
    def _encoded(tensor):
        """The tensor's object bytes, or INVALID_PARAMS (also where torch
        is not importable: then nothing passed can be a tensor)."""
        try:
            return _tensors().encode(tensor)
        except (TypeError, ValueError, RuntimeError, ImportError):
            return int(ErrorCode.INVALID_PARAMS)

    @staticmethod
    def _sharded(tensor, tp_size, split_dim):
        """The tensor's tp_size shard objects, or INVALID_PARAMS."""
        if not isinstance(tp_size, int) or not isinstance(split_dim, int):
            return int(ErrorCode.INVALID_PARAMS)
        try:
            return _tensors().shards(tensor, tp_size, split_dim)
        except (TypeError, ValueError, RuntimeError, ImportError):
            return int(ErrorCode.INVALID_PARAMS)

    @staticmethod
    def _config_error(config: ReplicateConfig | None) -> int:
        """Mooncake's check of the pub_tensor calls: preferred_segments,
        when given, name one segment per replica."""
        if config is not None and config.preferred_segments and len(config.preferred_segments) != config.replica_num:
            return ErrorCode.INVALID_PARAMS
        return 0

    def put_tensor(self, key: str, tensor, config: ReplicateConfig | None = None) -> int:
        """Stores a tensor (up to 8 dimensions, any of Mooncake's dtypes;
        a device tensor is copied to host memory first) in Mooncake's
        format; 0 or a negative code."""
        data = self._encoded(tensor)
        if isinstance(data, int):
            return data
        return self._put_values([key], [data], config)[0]

    def batch_put_tensor(self, keys, tensors_list, config: ReplicateConfig | None = None) -> list[int]:
        keys, tensors_list = list(keys), list(tensors_list)
        if len(keys) != len(tensors_list):
            return [int(ErrorCode.INVALID_PARAMS)] * len(keys)
        return self._put_values(keys, [self._encoded(t) for t in tensors_list], config)

    def pub_tensor(self, key: str, tensor, config: ReplicateConfig | None = None) -> int:
        """put_tensor with a ReplicateConfig (Mooncake's name for it)."""
        return self._config_error(config) or self.put_tensor(key, tensor, config)

    def batch_pub_tensor(self, keys, tensors_list, config: ReplicateConfig | None = None) -> list[int]:
        keys = list(keys)
        if self._config_error(config):
            return [int(ErrorCode.INVALID_PARAMS)] * len(keys)
        return self.batch_put_tensor(keys, tensors_list, config)

    def put_tensor_with_tp(self, key: str, tensor, tp_rank: int = 0, tp_size: int = 1, split_dim: int = 0,
                           config: ReplicateConfig | None = None) -> int:
        """Stores all tp_size shards of the tensor along split_dim, rank r
        under "<key>_tp_<r>" (tp_rank is not used: every rank's shard is
        written, as in Mooncake); with tp_size 1, put_tensor(key). 0, or
        the first shard's error; INVALID_PARAMS when the dimension does
        not divide into tp_size equal shards."""
        if not isinstance(tp_size, int) or tp_size <= 1:
            return self.put_tensor(key, tensor, config)
        parts = self._sharded(tensor, tp_size, split_dim)
        if isinstance(parts, int):
            return parts
        if not _key_ok(key):
            return ErrorCode.INVALID_PARAMS
        codes = self._put_values([self._tp_key(key, r) for r in range(tp_size)], parts, config)
        return next((c for c in codes if c), 0)

    def batch_put_tensor_with_tp(self, base_keys, tensors_list, tp_rank: int = 0, tp_size: int = 1,
                                 split_dim: int = 0, config: ReplicateConfig | None = None) -> list[int]:
        """put_tensor_with_tp of each tensor, in one batch: per key 0 or
        its first shard's error; mismatched or empty lists fail every
        key."""
        keys, tensors = list(base_keys), list(tensors_list)
        if not isinstance(tp_size, int) or tp_size <= 1:
            return self.batch_put_tensor(keys, tensors, config)
        if len(keys) != len(tensors) or not keys:
            return [int(ErrorCode.INVALID_PARAMS)] * len(keys)
        out = [0] * len(keys)
        flat_keys, flat_vals, owner = [], [], []
        for i, (k, t) in enumerate(zip(keys, tensors)):
            parts = self._sharded(t, tp_size, split_dim) if _key_ok(k) else int(ErrorCode.INVALID_PARAMS)
            if isinstance(parts, int):
                out[i] = parts
                continue
            for r, p in enumerate(parts):
                flat_keys.append(self._tp_key(k, r))
                flat_vals.append(p)
                owner.append(i)
        for i, c in zip(owner, self._put_values(flat_keys, flat_vals, config)):
            out[i] = out[i] or c
        return out

    def pub_tensor_with_tp(self, key: str, tensor, config: ReplicateConfig | None = None, tp_rank: int = 0,
                           tp_size: int = 1, split_dim: int = 0) -> int:
        return self._config_error(config) or self.put_tensor_with_tp(key, tensor, tp_rank, tp_size, split_dim, config)

    def batch_pub_tensor_with_tp(self, base_keys, tensors_list, config: ReplicateConfig | None = None,
                                 tp_rank: int = 0, tp_size: int = 1, split_dim: int = 0) -> list[int]:
        keys = list(base_keys)
        if self._config_error(config):
            return [int(ErrorCode.INVALID_PARAMS)] * len(keys)
        return self.batch_put_tensor_with_tp(keys, tensors_list, tp_rank, tp_size, split_dim, config)

    def upsert_tensor(self, key: str, tensor, config: ReplicateConfig | None = None) -> int:
        """put_tensor that replaces what the key holds (upsert)."""
        data = self._encoded(tensor)
        return data if isinstance(data, int) else self.upsert(key, data, config)

    def batch_upsert_tensor(self, keys, tensors_list, config: ReplicateConfig | None = None) -> list[int]:
        keys, tensors_list = list(keys), list(tensors_list)
        if len(keys) != len(tensors_list):
            return [int(ErrorCode.INVALID_PARAMS)] * len(keys)
        return [int(self.upsert_tensor(k, t, config)) for k, t in zip(keys, tensors_list)]

    def upsert_pub_tensor(self, key: str, tensor, config: ReplicateConfig | None = None) -> int:
        return self._config_error(config) or self.upsert_tensor(key, tensor, config)

    def batch_upsert_pub_tensor(self, keys, tensors_list, config: ReplicateConfig | None = None) -> list[int]:
        keys = list(keys)
        if self._config_error(config):
            return [int(ErrorCode.INVALID_PARAMS)] * len(keys)
        return self.batch_upsert_tensor(keys, tensors_list, config)

    def _tensor_object(self, ptr, size):
        """A view of [ptr, ptr+size) in registered memory when it holds an
        object in Mooncake's tensor format (header and bytes), else None."""
        try:
            mv = self._view(ptr, size)
        except YuebingError:
            return None
        return mv if _tensors().parse(mv) is not None else None

    def put_tensor_from(self, key: str, buffer_ptr: int, size: int) -> int:
        """Stores size bytes of registered memory that hold a tensor object
        ([TensorMetadata][data], as get_tensor_into leaves it); bytes that
        are not one are refused with INVALID_PARAMS."""
        return self.batch_put_tensor_from([key], [buffer_ptr], [size])[0]

    def batch_put_tensor_from(self, keys, buffer_ptrs, sizes) -> list[int]:
        return self._tensor_objects_from(keys, buffer_ptrs, sizes, self.batch_put_from)

    def upsert_tensor_from(self, key: str, buffer_ptr: int, size: int) -> int:
        return self.batch_upsert_tensor_from([key], [buffer_ptr], [size])[0]

    def batch_upsert_tensor_from(self, keys, buffer_ptrs, sizes) -> list[int]:
        return self._tensor_objects_from(keys, buffer_ptrs, sizes, self.batch_upsert_from)

    def _tensor_objects_from(self, keys, ptrs, sizes, write) -> list[int]:
        keys, ptrs, sizes = list(keys), list(ptrs), list(sizes)
        bad = int(ErrorCode.INVALID_PARAMS)
        if not (len(keys) == len(ptrs) == len(sizes)):
            return [bad] * len(keys)
        out = [bad] * len(keys)
        good = [i for i in range(len(keys)) if self._tensor_object(ptrs[i], sizes[i]) is not None]
        if good:
            for i, c in zip(good, write([keys[i] for i in good], [ptrs[i] for i in good], [sizes[i] for i in good])):
                out[i] = c
        return out

    def put_tensor_with_tp_from(self, key: str, buffer_ptr: int, size: int, tp_rank: int = 0, tp_size: int = 1,
                                split_dim: int = 0) -> int:
        """put_tensor_with_tp of the tensor object in registered memory."""
        return self.batch_put_tensor_with_tp_from([key], [buffer_ptr], [size], tp_rank, tp_size, split_dim)[0]

    def batch_put_tensor_with_tp_from(self, base_keys, buffer_ptrs, sizes, tp_rank: int = 0, tp_size: int = 1,
                                      split_dim: int = 0) -> list[int]:
        keys, ptrs, sizes = list(base_keys), list(buffer_ptrs), list(sizes)
        if not isinstance(tp_size, int) or tp_size <= 1:
            return self.batch_put_tensor_from(keys, ptrs, sizes)
        if not (len(keys) == len(ptrs) == len(sizes)) or not keys:
            return [int(ErrorCode.INVALID_PARAMS)] * len(keys)
        tensors = []
        for p, n in zip(ptrs, sizes):
            mv = self._tensor_object(p, n)
            try:
                tensors.append(_tensors().decode(mv, copy=False) if mv is not None else None)
            except ImportError:
                tensors.append(None)
        return self.batch_put_tensor_with_tp(keys, [t if t is not None else "not a tensor" for t in tensors],
                                             tp_rank, tp_size, split_dim)

    def get_tensor(self, key: str):
        """The tensor stored under key (a shard's local shape for a shard
        object), or None (missing key, failed read, bytes in no tensor
        format Mooncake reads)."""
        data = self.get(key)
        if not data:
            return None
        return _tensors().decode(data)

    def batch_get_tensor(self, keys) -> list:
        return [None if not v else _tensors().decode(v) for v in self.get_batch(keys)]

    def _rank_keys(self, keys, tp_rank, tp_size):
        if not isinstance(tp_size, int) or tp_size <= 1:
            return list(keys)
        return [self._tp_key(k, tp_rank) if isinstance(k, str) else k for k in keys]

    def get_tensor_with_tp(self, key: str, tp_rank: int = 0, tp_size: int = 1, split_dim: int = 0):
        """Rank tp_rank's shard, "<key>_tp_<tp_rank>" (key itself with
        tp_size 1), or None."""
        return self.get_tensor(self._rank_keys([key], tp_rank, tp_size)[0])

    def batch_get_tensor_with_tp(self, base_keys, tp_rank: int = 0, tp_size: int = 1) -> list:
        return self.batch_get_tensor(self._rank_keys(base_keys, tp_rank, tp_size))

    def get_tensor_into(self, key: str, buffer_ptr: int, size: int):
        """Reads the tensor's object into the registered buffer and returns
        a tensor viewing its bytes there (past the header), or None."""
        n = self.get_into(key, buffer_ptr, size)
        if n <= 0:
            return None
        return _tensors().decode(self._view(buffer_ptr, n), copy=False)

    def batch_get_tensor_into(self, keys, buffer_ptrs, sizes) -> list:
        got = self.batch_get_into(keys, buffer_ptrs, sizes)
        return [_tensors().decode(self._view(p, n), copy=False) if n > 0 else None
                for p, n in zip(buffer_ptrs, got)]

    def get_tensor_with_tp_into(self, key: str, buffer_ptr: int, size: int, tp_rank: int = 0, tp_size: int = 1,
                                split_dim: int = 0):
        return self.get_tensor_into(self._rank_keys([key], tp_rank, tp_size)[0], buffer_ptr, size)

    def batch_get_tensor_with_tp_into(self, base_keys, buffer_ptrs, sizes, tp_rank: int = 0, tp_size: int = 1) -> list:
        return self.batch_get_tensor_into(self._rank_keys(base_keys, tp_rank, tp_size), buffer_ptrs, sizes)


class ReplicaDesc:
    """One copy of an object, as Mooncake's replica descriptor describes it:
    ``is_memory_replica()`` for a copy in a node's DRAM (or HBM),
    ``is_disk_replica()`` for one on SSD or object storage; ``node`` is the
    holding node's name ("" for the node the store talks to) and ``tiers``
    where it holds it. ``status`` is always "COMPLETE": yuebing lists
    only committed blocks."""

    _MEMORY = ("hbm", "dram", "memory")

    def __init__(self, node: str, tiers):
        self.node = node
        self.tiers = list(tiers)
        self.status = "COMPLETE"

    def is_memory_replica(self) -> bool:
        return any(t in self._MEMORY for t in self.tiers)

    def is_disk_replica(self) -> bool:
        return bool(self.tiers) and not self.is_memory_replica()

    def __repr__(self):
        return f"ReplicaDesc(node={self.node!r}, tiers={self.tiers})"


def _tensors():
    """The tensor codec; torch is imported only by the calls that need it."""
    from . import _tensor
    return _tensor


def load_config(extra: dict | None = None) -> dict:
    """The Mooncake client configuration the engines' connectors read, as
    a dict for ``setup``: ``extra`` (SGLang's extra_config) when it names
    ``master_server_address``; else the JSON file named by
    ``MOONCAKE_CONFIG_PATH`` (vLLM, LMCache) or
    ``SGLANG_HICACHE_MOONCAKE_CONFIG_PATH`` (SGLang); else the
    environment (``MOONCAKE_MASTER``, ``MOONCAKE_LOCAL_HOSTNAME`` or
    ``LOCAL_HOSTNAME``, ``MOONCAKE_TE_META_DATA_SERVER``,
    ``MOONCAKE_GLOBAL_SEGMENT_SIZE``, ``MOONCAKE_LOCAL_BUFFER_SIZE``,
    ``MOONCAKE_PROTOCOL``, ``MOONCAKE_DEVICE``, ``MOONCAKE_TENANT_ID``).
    Raises ValueError when none names the node."""
    if extra and extra.get("master_server_address"):
        return dict(extra)
    for var in ("MOONCAKE_CONFIG_PATH", "SGLANG_HICACHE_MOONCAKE_CONFIG_PATH"):
        path = os.environ.get(var)
        if path:
            try:
                with open(path) as f:
                    cfg = json.load(f)
            except (OSError, ValueError) as e:
                raise ValueError(f"{var}={path}: {e}") from e
            if not isinstance(cfg, dict) or not cfg.get("master_server_address"):
                raise ValueError(f"{var}={path}: no master_server_address")
            return cfg
    env = os.environ
    if not env.get("MOONCAKE_MASTER"):
        raise ValueError("no Mooncake config: set MOONCAKE_CONFIG_PATH or MOONCAKE_MASTER to the yuebing node's address")
    cfg = {"master_server_address": env["MOONCAKE_MASTER"],
           "local_hostname": env.get("MOONCAKE_LOCAL_HOSTNAME") or env.get("LOCAL_HOSTNAME") or "localhost",
           "metadata_server": env.get("MOONCAKE_TE_META_DATA_SERVER", "P2PHANDSHAKE"),
           "global_segment_size": env.get("MOONCAKE_GLOBAL_SEGMENT_SIZE", 4 << 30),
           "local_buffer_size": env.get("MOONCAKE_LOCAL_BUFFER_SIZE", 16 << 20),
           "protocol": env.get("MOONCAKE_PROTOCOL", "tcp"),
           "device_name": env.get("MOONCAKE_DEVICE", "")}
    if env.get("MOONCAKE_TENANT_ID"):
        cfg["tenant_id"] = env["MOONCAKE_TENANT_ID"]
    return cfg
