"""Wheelhouse for Python: a client of the HTTP API and a worker on the worker channel (WebSocket,
with HTTP long-poll as the fallback). Standard library only."""

from .client import FINISHED, Client, Limits, task_body
from .context import CANCELLED, DEADLINE, LEASE_LOST, STOPPING, TaskContext
from .errors import (
    API_ERROR_CODES,
    ApiError,
    AuthError,
    BacklogFullError,
    ConflictError,
    NetworkError,
    NotFoundError,
    PayloadTooLargeError,
    PermanentError,
    TaskCancelled,
    TaskNotFoundError,
    UnavailableError,
    ValidationError,
    WaitTimeout,
    WheelhouseError,
)
from .worker import Worker

__version__ = "0.1.0"

__all__ = [
    "API_ERROR_CODES",
    "ApiError",
    "AuthError",
    "BacklogFullError",
    "CANCELLED",
    "Client",
    "ConflictError",
    "DEADLINE",
    "FINISHED",
    "LEASE_LOST",
    "Limits",
    "NetworkError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermanentError",
    "STOPPING",
    "TaskCancelled",
    "TaskContext",
    "TaskNotFoundError",
    "UnavailableError",
    "ValidationError",
    "WaitTimeout",
    "WheelhouseError",
    "Worker",
    "task_body",
]
