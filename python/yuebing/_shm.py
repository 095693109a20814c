"""A same-host shared-memory staging session (server/staging): the node
passes a sealed memfd over its unix socket; this process maps it, and
blocks move between the caller's buffer and the mapping with one memmove
while the node copies between the mapping and its store."""

from __future__ import annotations

import ctypes
import fcntl
import itertools
import json
import mmap
import os
import socket
import threading

from .errors import ConnectionFailed, Overloaded, error_for

# Ranges are handed out in pages: neighbours never share a cache line and
# the server's copies start aligned.
_ALIGN = 4096
# One encoder for every request line: json.dumps with any argument of its
# own builds a new JSONEncoder per call, a few microseconds of each
# request on the session's socket.
_encode = json.JSONEncoder(separators=(",", ":")).encode


class Staging:
    """One session: the mapping, an allocator of its ranges (safe for
    concurrent use) and the socket whose lifetime is the session's."""

    def __init__(self, address: str, token: str | None, size: int, timeout: float = 10.0,
                 timeout_ops: float | None = 120.0):
        name = "\0" + address[1:] if address.startswith("@") else address
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(name)
            s.sendall(json.dumps({"token": token or "", "size": size}).encode() + b"\n")
            msg, fds, _, _ = socket.recv_fds(s, 4096, 1)
            while msg and not msg.endswith(b"\n"):
                more = s.recv(4096)
                if not more:
                    break
                msg += more
        except OSError as e:
            s.close()
            raise ConnectionFailed(0, "shm", f"{address}: {e}") from e
        try:
            ans = json.loads(msg or b"{}")
            if "error" in ans:
                raise error_for(0, ans["error"].get("code", "unknown"), ans["error"].get("message", ""))
            if len(fds) != 1 or ans.get("size") != size or not ans.get("session"):
                raise ConnectionFailed(0, "shm", f"unexpected answer from {address}: {msg[:200]!r}, {len(fds)} descriptors")
            st = os.fstat(fds[0])
            if st.st_size < size:
                raise ConnectionFailed(0, "shm", f"segment of {st.st_size} bytes, announced {size}")
            self.mm = mmap.mmap(fds[0], size)
        except BaseException:
            s.close()
            raise
        finally:
            for fd in fds:
                os.close(fd)
        s.settimeout(timeout_ops)
        self.sock = s
        self._rfile = s.makefile("rb", buffering=64 << 10)
        # One request at a time on the session's socket; the node answers
        # them in order.
        self._call_lock = threading.Lock()
        self.id: str = ans["session"]
        self.size = size
        self.view = memoryview(self.mm)
        self._free = [(0, size)]  # sorted, merged (offset, length)
        self._cond = threading.Condition()
        self._closed = False
        # Registered client buffers: MemfdBuffer.serial -> the node's id.
        self._regions: dict[int, int] = {}
        self._regions_lock = threading.Lock()
        self._no_regions: Exception | None = None

    def call(self, payload: dict) -> dict:
        """Sends one request line on the session's socket and returns the
        answer (the node's /v1/shm get and put, without HTTP)."""
        line = _encode(payload).encode() + b"\n"
        with self._call_lock:
            if self._closed:
                raise ConnectionFailed(0, "closed", "the shared-memory session is closed")
            try:
                self.sock.sendall(line)
                ans = self._rfile.readline()
                if not ans.endswith(b"\n"):
                    raise ConnectionFailed(0, "shm", "the node closed the session")
            except BaseException as e:
                # A request cut off half way (an error, a timeout, an
                # interrupt) would leave its answer to the next caller:
                # the session is unusable from here on.
                self._broken()
                if isinstance(e, OSError):
                    raise ConnectionFailed(0, "shm", f"session socket: {e}") from e
                raise
        out = json.loads(ans)
        if "error" in out and "results" not in out:
            e = out["error"]
            raise error_for(0, e.get("code", "unknown"), e.get("message", ""))
        return out

    def register(self, buf: "MemfdBuffer") -> int:
        """The node's region id of buf, registering it on first use: the
        node maps buf's memfd and copies blocks straight into (and out
        of) it. Raises BadRequest where the node cannot (an older node,
        a refused descriptor) and remembers that for the session."""
        with self._regions_lock:
            rid = self._regions.get(buf.serial)
            if rid is not None:
                return rid
            if self._no_regions is not None:
                raise self._no_regions
            line = json.dumps({"op": "register", "size": buf.size}).encode() + b"\n"
            with self._call_lock:
                if self._closed:
                    raise ConnectionFailed(0, "closed", "the shared-memory session is closed")
                try:
                    socket.send_fds(self.sock, [line], [buf.fd])
                    ans = self._rfile.readline()
                    if not ans.endswith(b"\n"):
                        raise ConnectionFailed(0, "shm", "the node closed the session")
                except BaseException as e:
                    self._broken()
                    if isinstance(e, OSError):
                        raise ConnectionFailed(0, "shm", f"session socket: {e}") from e
                    raise
            out = json.loads(ans)
            if "error" in out or not out.get("region"):
                e = out.get("error") or {}
                err = error_for(0, e.get("code", "bad_request"), e.get("message", "no region in the answer"))
                if e.get("code") != "overloaded":
                    self._no_regions = err
                raise err
            self._regions[buf.serial] = out["region"]
            buf._sessions.append(self)
            return out["region"]

    def unregister(self, buf: "MemfdBuffer") -> None:
        with self._regions_lock:
            rid = self._regions.pop(buf.serial, None)
        if rid is not None and not self._closed:
            try:
                self.call({"op": "unregister", "region": rid})
            except Exception:  # the session's end unmaps it anyway
                pass

    def _broken(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    @property
    def closed(self) -> bool:
        return self._closed

    def alloc(self, n: int, timeout: float = 60.0) -> int:
        """A range of n bytes (n <= size), waiting for one to be freed."""
        need = max(_ALIGN, (n + _ALIGN - 1) // _ALIGN * _ALIGN)
        if need > self.size:
            raise ValueError(f"{n} bytes do not fit a {self.size}-byte segment")
        with self._cond:
            while True:
                if self._closed:
                    raise ConnectionFailed(0, "closed", "the shared-memory session is closed")
                for i, (off, ln) in enumerate(self._free):
                    if ln >= need:
                        if ln == need:
                            del self._free[i]
                        else:
                            self._free[i] = (off + need, ln - need)
                        return off
                if not self._cond.wait(timeout):
                    raise Overloaded(0, "overloaded", "no room in the shared-memory segment")

    def free(self, off: int, n: int) -> None:
        need = max(_ALIGN, (n + _ALIGN - 1) // _ALIGN * _ALIGN)
        with self._cond:
            fl = self._free
            i = 0
            while i < len(fl) and fl[i][0] < off:
                i += 1
            fl.insert(i, (off, need))
            # Merge with the neighbours.
            if i + 1 < len(fl) and fl[i][0] + fl[i][1] == fl[i + 1][0]:
                fl[i] = (fl[i][0], fl[i][1] + fl[i + 1][1])
                del fl[i + 1]
            if i > 0 and fl[i - 1][0] + fl[i - 1][1] == fl[i][0]:
                fl[i - 1] = (fl[i - 1][0], fl[i - 1][1] + fl[i][1])
                del fl[i]
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        try:
            self.view.release()
            self.mm.close()
        except (BufferError, ValueError):
            pass  # a caller still holds a view; the mapping goes with the process
        try:
            self._rfile.close()
        finally:
            self.sock.close()


_serials = itertools.count(1)
_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)  # Linux 5.14; Python names it from 3.12


class MemfdBuffer:
    """size bytes of zeroed, page-aligned memory backed by a memfd sealed
    against resizing, so a node on this host can map the same pages
    (Staging.register) and write blocks into them directly. ``ptr`` is its
    address; ``close`` unmaps it here and unregisters it from the sessions
    that use it."""

    def __init__(self, size: int, name: str = "yuebing-buffer"):
        fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            self.mm = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        try:
            # Pages allocated and mapped writable now rather than one
            # fault per 4 KiB page inside the first get_into or fill
            # (4,096 for 16 MiB; on a VM with shadow page tables each
            # costs tens of microseconds). MAP_POPULATE would map a
            # shared mapping's pages read-only, and writes still fault.
            self.mm.madvise(_POPULATE_WRITE)
        except (OSError, ValueError):
            pass  # a kernel before 5.14: the first touches fault instead
        self.fd = fd
        self.size = size
        self.serial = next(_serials)
        self.ptr = ctypes.addressof(ctypes.c_char.from_buffer(self.mm))
        self._sessions: list[Staging] = []

    def close(self) -> None:
        for st in self._sessions:
            st.unregister(self)
        self._sessions = []
        try:
            self.mm.close()
        except BufferError:
            pass  # a view is still alive: the mapping goes with it
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
