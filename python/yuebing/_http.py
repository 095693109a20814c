"""A small HTTP/1.1 client with keep-alive connections, made for bodies that
go straight between the caller's buffer and the socket: a request body is
sent from a memoryview with ``sendmsg`` beside the head, a response body is
read with ``recv_into`` into the caller's memoryview. No intermediate
``bytes``."""

from __future__ import annotations

import socket
import ssl
import threading
import urllib.parse

from .errors import ConnectionFailed, YuebingError

# Bytes read at once while the answer's head is parsed; the body's bulk
# bypasses this buffer.
_CHUNK = 64 << 10
# Bounds an answer's head: the server's are a few hundred bytes.
_MAX_HEAD = 64 << 10


class Response:
    """An answer whose body has not been read yet. Read it with
    ``read()`` or ``read_into()`` (exactly once), or ``discard()``."""

    __slots__ = ("status", "headers", "_conn", "_left", "_chunked", "_done")

    def __init__(self, conn: "_Conn", status: int, headers: dict[str, str], head: bool = False):
        self.status = status
        self.headers = headers
        self._conn = conn
        # An answer to HEAD announces the length of a body it does not send.
        self._chunked = not head and "chunked" in headers.get("transfer-encoding", "").lower()
        self._left = 0 if head or status in (204, 304) else int(headers.get("content-length", "0")) if not self._chunked else -1
        self._done = False

    @property
    def length(self) -> int:
        """The body's length, -1 when chunked."""
        return self._left

    def read(self) -> bytes:
        if self._chunked:
            out = bytearray()
            while True:
                line = self._conn.readline()
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self._conn.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunk = bytearray(size)
                self._conn.read_into(memoryview(chunk))
                out += chunk
                self._conn.readline()
            self._finish()
            return bytes(out)
        buf = bytearray(self._left)
        self._conn.read_into(memoryview(buf))
        self._finish()
        return bytes(buf)

    def read_into(self, mv: memoryview) -> int:
        """Reads the whole body into the start of mv, which must be at
        least as long, and returns its length."""
        if self._chunked:
            data = self.read()
            if len(data) > len(mv):
                raise ValueError("body longer than the buffer")
            mv[: len(data)] = data
            return len(data)
        n = self._left
        if n > len(mv):
            raise ValueError(f"body of {n} bytes, buffer of {len(mv)}")
        self._conn.read_into(mv[:n])
        self._finish()
        return n

    def discard(self) -> None:
        if self._chunked:
            self.read()
            return
        if self._left > _MAX_HEAD * 16:
            # Not worth reading a large unwanted body: drop the connection.
            self._conn.broken = True
            self._finish()
            return
        self.read()

    def _finish(self) -> None:
        if not self._done:
            self._done = True
            self._conn.pool._release(self._conn, self.headers.get("connection", "").lower() == "close")


class _Conn:
    __slots__ = ("sock", "buf", "pos", "pool", "broken", "used", "tls")

    def __init__(self, pool: "Pool"):
        self.pool = pool
        try:
            s = socket.create_connection((pool.host, pool.port), timeout=pool.timeout)
        except OSError as e:
            raise ConnectionFailed(0, "unreachable", f"{pool.host}:{pool.port}: {e}") from e
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if pool.tls:
            s = ssl.create_default_context().wrap_socket(s, server_hostname=pool.host)
        self.tls = pool.tls
        self.sock = s
        self.buf = bytearray()
        self.pos = 0
        self.broken = False
        self.used = False

    def _fill(self) -> bool:
        if self.pos:
            del self.buf[: self.pos]
            self.pos = 0
        chunk = self.sock.recv(_CHUNK)
        if not chunk:
            return False
        self.buf += chunk
        return True

    def readline(self) -> bytes:
        while True:
            i = self.buf.find(b"\n", self.pos)
            if i >= 0:
                line = bytes(self.buf[self.pos : i + 1])
                self.pos = i + 1
                return line
            if len(self.buf) - self.pos > _MAX_HEAD:
                raise ConnectionFailed(0, "protocol", "answer line too long")
            if not self._fill():
                raise ConnectionFailed(0, "closed", "connection closed by the server")

    def read_into(self, mv: memoryview) -> None:
        got = min(len(self.buf) - self.pos, len(mv))
        if got:
            # Through a view: a slice of the bytearray would be one more copy.
            with memoryview(self.buf) as b:
                mv[:got] = b[self.pos : self.pos + got]
            self.pos += got
        n = len(mv)
        recv_into = self.sock.recv_into
        while got < n:
            k = recv_into(mv[got:], n - got)
            if k == 0:
                raise ConnectionFailed(0, "closed", "connection closed in the middle of a body")
            got += k

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class Pool:
    """Keep-alive connections to one server, safe for concurrent use: each
    request takes a connection of its own and gives it back once its answer
    has been read."""

    def __init__(self, url: str, timeout: float = 60.0, max_idle: int = 32):
        if "://" not in url:
            url = "http://" + url
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"server URL {url!r}: want http://host:port")
        self.tls = u.scheme == "https"
        self.host = u.hostname
        self.port = u.port or (443 if self.tls else 80)
        self.base = u.path.rstrip("/")
        self.host_header = u.netloc
        self.timeout = timeout
        self.max_idle = max_idle
        self._idle: list[_Conn] = []
        self._lock = threading.Lock()
        self._closed = False

    def _get(self) -> _Conn:
        with self._lock:
            if self._closed:
                raise YuebingError(0, "closed", "the client is closed")
            if self._idle:
                return self._idle.pop()
        return _Conn(self)

    def _release(self, c: _Conn, close: bool) -> None:
        if close or c.broken:
            c.close()
            return
        with self._lock:
            if not self._closed and len(self._idle) < self.max_idle:
                self._idle.append(c)
                return
        c.close()

    def request(self, method: str, path: str, headers: dict[str, str] | None = None,
                body=None, retry: bool = True) -> Response:
        """Sends a request and reads the answer's head. body is None, bytes
        or any buffer (sent straight from it). A request on a reused
        connection that the server had closed is retried once on a new one
        when ``retry`` (every request here is idempotent or a put of
        immutable bytes)."""
        head = [f"{method} {self.base}{path} HTTP/1.1\r\nHost: {self.host_header}\r\n"]
        if headers:
            for k, v in headers.items():
                head.append(f"{k}: {v}\r\n")
        mv = None
        if body is not None:
            mv = memoryview(body).cast("B")
            head.append(f"Content-Length: {len(mv)}\r\n")
        elif method in ("POST", "PUT", "PATCH"):
            head.append("Content-Length: 0\r\n")
        head.append("\r\n")
        data = "".join(head).encode("latin-1")
        while True:
            c = self._get()
            reused = c.used
            c.used = True
            try:
                if mv is None:
                    c.sock.sendall(data)
                else:
                    try:
                        self._send(c, data, mv)
                    except OSError:
                        # A server may refuse a put from its headers
                        # (a quota, a bad header) and close without
                        # reading the body: its answer is there to read.
                        early = self._early(c, method == "HEAD")
                        if early is None:
                            raise
                        return early
                return self._head(c, method == "HEAD")
            except (OSError, ConnectionFailed) as e:
                c.close()
                if reused and retry:
                    retry = False
                    continue
                if isinstance(e, ConnectionFailed):
                    raise
                raise ConnectionFailed(0, "io", f"{method} {path}: {e}") from e

    @staticmethod
    def _send(c: _Conn, data: bytes, mv: memoryview) -> None:
        """Sends the request head and the body from the caller's buffer:
        both in one sendmsg (one system call, and the head and a small body
        leave in one segment) without joining them into a new buffer."""
        if c.tls:
            # An SSL socket has no sendmsg; a small body joins the head so
            # they still leave in one record.
            if len(mv) <= 16 << 10:
                c.sock.sendall(data + mv.tobytes())
            else:
                c.sock.sendall(data)
                c.sock.sendall(mv)
            return
        sent = c.sock.sendmsg((data, mv))
        if sent < len(data):
            c.sock.sendall(memoryview(data)[sent:])
            sent = len(data)
        if sent - len(data) < len(mv):
            c.sock.sendall(mv[sent - len(data):])

    def _early(self, c: _Conn, head: bool) -> Response | None:
        """The answer the server sent before it stopped reading the
        request, or None. The connection is not reused after it."""
        c.broken = True
        try:
            return self._head(c, head)
        except (OSError, ConnectionFailed):
            return None

    def _head(self, c: _Conn, head: bool) -> Response:
        line = c.readline()
        parts = line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise ConnectionFailed(0, "protocol", f"bad status line {line[:80]!r}")
        status = int(parts[1])
        headers: dict[str, str] = {}
        while True:
            h = c.readline()
            if h in (b"\r\n", b"\n"):
                break
            k, _, v = h.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        return Response(c, status, headers, head)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()
