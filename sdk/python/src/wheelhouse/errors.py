"""What the SDK raises. A node's error answer (``{"error": {"code", "message", "details"}}``) is an
``ApiError`` (or the subclass of its family), carrying the catalogue ``code`` (docs/api.md,
"Errors"), the HTTP ``status``, ``details`` and ``retry_after`` seconds. A request that got no
answer is a ``NetworkError``; ``Client.wait_for`` running out of time is a ``WaitTimeout``.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence

#: The error codes a node answers with (src/lib/errors.ts); a test holds the two equal.
API_ERROR_CODES = (
    "validation_failed",
    "malformed_json",
    "invalid_cron",
    "unknown_timezone",
    "dependency_cycle",
    "unknown_dependency",
    "unknown_limit",
    "payload_too_large",
    "unauthorized",
    "forbidden",
    "host_not_allowed",
    "origin_not_allowed",
    "not_found",
    "task_not_found",
    "route_not_found",
    "method_not_allowed",
    "unsupported_media_type",
    "idempotency_conflict",
    "lease_not_held",
    "task_finished",
    "invalid_transition",
    "limit_in_use",
    "backlog_full",
    "too_many_polls",
    "too_many_sockets",
    "store_unavailable",
    "not_ready",
    "ask_timeout",
    "mailbox_full",
    "stale_epoch",
    "internal",
)


class WheelhouseError(Exception):
    """Base of every error the SDK raises."""


class ApiError(WheelhouseError):
    """A node answered with an error status."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Optional[Mapping[str, Any]] = None,
        retry_after: Optional[float] = None,
        method: str = "",
        path: str = "",
        raw_code: Optional[str] = None,
    ) -> None:
        super().__init__(f"{method} {path} answered {status} {code}: {message}")
        self.status = status
        #: The catalogue code; for an answer without one the SDK knows, the code of the status's family.
        self.code = code
        #: The code as sent (None when the answer had none).
        self.raw_code = raw_code
        self.error_message = message
        self.details: Dict[str, Any] = dict(details or {})
        #: ``Retry-After`` in seconds, None when the node sent none.
        self.retry_after = retry_after
        self.method = method
        self.path = path


class ValidationError(ApiError):
    """A 400: the request is not valid. ``field`` names the failing field, ``index`` a batch item."""

    @property
    def field(self) -> Optional[str]:
        value = self.details.get("field")
        return value if isinstance(value, str) else None

    @property
    def index(self) -> Optional[int]:
        value = self.details.get("index")
        return value if isinstance(value, int) else None


class PayloadTooLargeError(ApiError):
    """A 413: the body is larger than the node's limit."""


class AuthError(ApiError):
    """A 401 (no key, or one the cluster does not know) or 403 (a key without the route's scope)."""


class NotFoundError(ApiError):
    """A 404 other than an unknown task."""


class TaskNotFoundError(NotFoundError):
    """A 404 ``task_not_found``."""


class ConflictError(ApiError):
    """A 409: idempotency conflict, a finished task, a lost lease, an invalid transition, a limit in use."""


class BacklogFullError(ApiError):
    """A 429 after the retries ran out."""


class UnavailableError(ApiError):
    """A 503 after the retries ran out: nothing was written."""


class NetworkError(WheelhouseError):
    """The request got no answer (connection refused or reset, time limit), or an unreadable one."""

    def __init__(self, method: str, path: str, message: str, timed_out: bool = False) -> None:
        super().__init__(f"{method} {path}: {message}")
        self.method = method
        self.path = path
        self.timed_out = timed_out


class WaitTimeout(WheelhouseError):
    """``wait_for`` ran out of time before the task reached one of the statuses."""

    def __init__(self, task_id: str, statuses: Sequence[str], last_status: Optional[str], timeout: float) -> None:
        super().__init__(
            f"task {task_id} did not reach {' or '.join(statuses)} within {timeout} s (last status: {last_status})"
        )
        self.task_id = task_id
        self.statuses = tuple(statuses)
        self.last_status = last_status
        self.timeout = timeout


class PermanentError(Exception):
    """Raised by a task handler: the attempt fails for good (``retryable: false``), no retry."""


class TaskCancelled(Exception):
    """Raised by ``TaskContext.check()`` once the attempt should stop; ``reason`` says why:
    ``cancelled`` (a cancel was requested), ``lease_lost``, ``deadline`` or ``stopping``."""

    def __init__(self, task_id: str, reason: str) -> None:
        super().__init__(f"task {task_id}: {reason}")
        self.task_id = task_id
        self.reason = reason


_STATUS_CODES = {
    400: "validation_failed",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "invalid_transition",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "backlog_full",
    503: "store_unavailable",
}

_CLASSES = {
    "validation_failed": ValidationError,
    "malformed_json": ValidationError,
    "invalid_cron": ValidationError,
    "unknown_timezone": ValidationError,
    "dependency_cycle": ValidationError,
    "unknown_dependency": ValidationError,
    "unknown_limit": ValidationError,
    "payload_too_large": PayloadTooLargeError,
    "unauthorized": AuthError,
    "forbidden": AuthError,
    "host_not_allowed": AuthError,
    "origin_not_allowed": AuthError,
    "task_not_found": TaskNotFoundError,
    "not_found": NotFoundError,
    "route_not_found": NotFoundError,
    "idempotency_conflict": ConflictError,
    "lease_not_held": ConflictError,
    "task_finished": ConflictError,
    "invalid_transition": ConflictError,
    "limit_in_use": ConflictError,
    "backlog_full": BacklogFullError,
    "too_many_polls": BacklogFullError,
    "too_many_sockets": BacklogFullError,
    "store_unavailable": UnavailableError,
    "not_ready": UnavailableError,
    "ask_timeout": UnavailableError,
    "mailbox_full": UnavailableError,
    "stale_epoch": UnavailableError,
}


def api_error(
    status: int, body: Any, retry_after: Optional[float] = None, method: str = "", path: str = ""
) -> ApiError:
    """The error for a non-2xx answer: its family's class with the body's code, message and details."""
    error = body.get("error") if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else {}
    raw = error.get("code")
    raw_code = raw if isinstance(raw, str) else None
    if raw_code in API_ERROR_CODES:
        code = raw_code
    else:
        code = _STATUS_CODES.get(status, "validation_failed" if 400 <= status < 500 else "internal")
    message = error.get("message")
    details = error.get("details")
    cls = _CLASSES.get(code, ApiError)
    return cls(
        status,
        code,
        message if isinstance(message, str) else f"HTTP {status}",
        details if isinstance(details, dict) else {},
        retry_after,
        method,
        path,
        raw_code,
    )
