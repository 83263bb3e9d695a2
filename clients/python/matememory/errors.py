"""Errors of the MateMemory API as classes: catch ConflictError rather than read a status."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping


class MateMemoryError(Exception):
    """An error answer of the API: the HTTP status and the envelope's code and msg."""

    def __init__(self, status: int, code: int, msg: str, method: str, path: str) -> None:
        super().__init__(f"matememory: {method} {path}: {code} {msg}")
        self.status = status
        """The HTTP status code."""
        self.code = code
        """The envelope's code (normally equal to status)."""
        self.msg = msg
        """What was wrong and, mostly, what to do (meant for a model too, after a tool call)."""
        self.method = method
        self.path = path

    @property
    def temporary(self) -> bool:
        """Whether the same request may succeed later unchanged."""
        return self.status in (408, 429, 502, 503, 504)


class InvalidRequestError(MateMemoryError):
    """400 (and 415): the request is invalid and will stay so; msg says why."""


class UnauthorizedError(MateMemoryError):
    """401: the API key is missing or unknown."""


class ForbiddenError(MateMemoryError):
    """403: the key may not act for that agent (or needs admin)."""


class NotFoundError(MateMemoryError):
    """404: no such file, conversation, run or route."""


class ConflictError(MateMemoryError):
    """409: the file changed since the version sent (read it again and redo the change), or a create-only write found it."""


class PreconditionFailedError(MateMemoryError):
    """412: ``If-None-Match: *`` found the file (PUT .../files/{filename}, documented on
    writeFile and mateclawWriteFile). No typed method sends that header (write_file with
    ``expected_version=0`` creates with ``If-Match: 0`` and raises ConflictError); a raw call that does can raise this."""


class TooLargeError(MateMemoryError):
    """413: the body or the assembled context is over its limit."""


class RateLimitedError(MateMemoryError):
    """429: rate limited; the client already waited and retried as its retry policy allows."""

    def __init__(self, status: int, code: int, msg: str, method: str, path: str, retry_after: float | None) -> None:
        super().__init__(status, code, msg, method, path)
        self.retry_after = retry_after
        """The server's Retry-After in seconds, when it sent one."""


class UnavailableError(MateMemoryError):
    """502, 503 or 504: JetStream or the database briefly unavailable."""


_CLASSES: dict[int, type[MateMemoryError]] = {
    400: InvalidRequestError,
    415: InvalidRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    412: PreconditionFailedError,
    413: TooLargeError,
    502: UnavailableError,
    503: UnavailableError,
    504: UnavailableError,
}


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Reads a Retry-After header (seconds or an HTTP date) as seconds."""
    v = (headers.get("retry-after") or "").strip()
    if not v:
        return None
    if v.isdigit():
        return float(v)
    try:
        when = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def error_for(status: int, code: int, msg: str, method: str, path: str, headers: Mapping[str, str]) -> MateMemoryError:
    """The error class that matches status."""
    if status == 429:
        return RateLimitedError(status, code, msg, method, path, retry_after(headers))
    return _CLASSES.get(status, MateMemoryError)(status, code, msg, method, path)


class IncompleteBundleError(Exception):
    """An export ended without the bundle's checksums line: what was received is incomplete
    (any import refuses it); export again. Not an answer of the API, so no MateMemoryError."""

    def __init__(self, received: int) -> None:
        super().__init__(f"matememory: the export ended without its checksums line after {received} bytes: "
                         "the bundle is incomplete, export again")
        self.received = received
        """The bytes received."""
