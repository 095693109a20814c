"""Exceptions of the native client: one per error code of the server."""

from __future__ import annotations

import json


class YuebingError(Exception):
    """A request failed. ``status`` is the HTTP status (0 when no answer
    came), ``code`` the server's machine-readable code (docs/api.md#errors),
    ``message`` its text."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{code} ({status}): {message}" if status else f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class ConnectionFailed(YuebingError):
    """The server could not be reached, or the connection broke."""


class BadRequest(YuebingError):
    """Malformed key, namespace, argument or body (400, 411, 416)."""


class Unauthenticated(YuebingError):
    """No or unknown bearer token (401)."""


class Forbidden(YuebingError):
    """A namespace of another tenant, or an admin endpoint (403)."""


class NotFound(YuebingError):
    """Not stored, or not visible to the caller (404)."""


class Conflict(YuebingError):
    """The key is stored under another namespace or name (409)."""


class TooLarge(YuebingError):
    """A block, batch or buffer over its limit (413)."""


class ChecksumMismatch(YuebingError):
    """Bytes that do not match their CRC-32C (422, or verified here)."""


class Overloaded(YuebingError):
    """The server's in-flight budget or context limit is used up; retry (429)."""


class NoSpace(YuebingError):
    """The store could not make room (507), or a hard pin would pass the
    namespace's pinned quota (409 pin_quota)."""


class Unavailable(YuebingError):
    """Shutting down, timed out, or no cluster leader (503)."""


_BY_CODE = {
    "unauthenticated": Unauthenticated,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "corrupt_dropped": NotFound,
    "no_route": NotFound,
    "no_cluster": NotFound,
    "conflict": Conflict,
    "too_large": TooLarge,
    "checksum_mismatch": ChecksumMismatch,
    "overloaded": Overloaded,
    "no_space": NoSpace,
    "pin_quota": NoSpace,  # a hard pin past the namespace's quota: no room for it
    "unavailable": Unavailable,
    "timeout": Unavailable,
    "no_leader": Unavailable,
}

_BY_STATUS = {400: BadRequest, 401: Unauthenticated, 403: Forbidden, 404: NotFound, 409: Conflict,
              411: BadRequest, 413: TooLarge, 416: BadRequest, 422: ChecksumMismatch,
              429: Overloaded, 503: Unavailable, 507: NoSpace}


def error_for(status: int, code: str, message: str) -> YuebingError:
    """The exception for an error answer or result item."""
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status) or YuebingError
    if cls is YuebingError and code.startswith("invalid") or code in ("bad_request", "size_mismatch"):
        cls = BadRequest
    return cls(status, code, message)


def from_body(status: int, body: bytes) -> YuebingError:
    """The exception for an HTTP error answer with the server's JSON body."""
    try:
        e = json.loads(body)["error"]
        return error_for(status, str(e["code"]), str(e["message"]))
    except (ValueError, KeyError, TypeError):
        return error_for(status, "unknown", body[:200].decode("utf-8", "replace").strip())
