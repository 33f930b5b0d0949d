"""What a task handler is given: the task, and the ways the worker talks to it while it runs."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Any, Callable, Dict, Mapping, Optional

from .errors import TaskCancelled

#: Why an attempt should stop (``TaskContext.reason``).
CANCELLED = "cancelled"  # a cancel was requested (DELETE /api/tasks/{id}): a result is still reported
LEASE_LOST = "lease_lost"  # the lease is no longer this worker's: a result would be discarded
DEADLINE = "deadline"  # the attempt reached its deadline: the node ends it as a timeout
STOPPING = "stopping"  # the worker stops and its grace ran out: the task is handed back


def parse_time(text: Optional[str]) -> Optional[float]:
    """An ISO-8601 UTC time as the node writes it (``2026-11-30T12:00:00.000Z``) → Unix seconds."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def lost_reason(ctx: "TaskContext") -> str:
    """Why a lease the node says is gone went: its deadline, when that has come (give or take the clocks), else lost."""
    if ctx.deadline is not None and time.time() >= ctx.deadline - 0.05:
        return DEADLINE
    return LEASE_LOST


class TaskContext:
    """One attempt of one task, as its handler sees it.

    ``cancelled`` is a ``threading.Event`` set when the attempt should stop (``reason`` says why:
    ``"cancelled"``, ``"lease_lost"``, ``"deadline"`` or ``"stopping"``): a long handler waits on
    it or calls ``check()`` between steps. ``deadline`` is when the node ends the attempt as a
    timeout (Unix seconds; ``time_left()`` counts down to it); the worker sets ``cancelled`` then.
    ``traceparent`` is the W3C trace context the task carries, when it carries one.
    """

    def __init__(
        self,
        task: Mapping[str, Any],
        progress: Callable[["TaskContext", Any], None],
        extend: Callable[["TaskContext", float], Optional[float]],
    ) -> None:
        self.task: Dict[str, Any] = dict(task)
        self.task_id: str = task["task_id"]
        self.task_type: str = task["task_type"]
        self.payload: Any = task.get("payload")
        self.attempt: int = int(task.get("attempt") or 1)
        self.lease_token: str = task["lease_token"]
        self.deadline_at: Optional[str] = task.get("deadline_at")
        self.deadline: Optional[float] = parse_time(self.deadline_at)
        self.traceparent: Optional[str] = task.get("traceparent")
        #: After a wait for children: ``{"total", "succeeded", "failed", "cancelled"}``.
        self.children: Optional[Dict[str, Any]] = task.get("children")
        #: Predecessors' results by id (a DAG's dependent, a parent run again), when it has any.
        self.inputs: Optional[Dict[str, Any]] = task.get("inputs")
        self.cancelled = threading.Event()
        self.reason: Optional[str] = None
        self._progress = progress
        self._extend = extend
        self._lock = threading.Lock()

    def check(self) -> None:
        """Raises ``TaskCancelled`` once ``cancelled`` is set."""
        if self.cancelled.is_set():
            raise TaskCancelled(self.task_id, self.reason or CANCELLED)

    def time_left(self) -> Optional[float]:
        """Seconds until the attempt's deadline (None when it has none)."""
        return None if self.deadline is None else self.deadline - time.time()

    def progress(self, value: Any) -> None:
        """Reports the task's latest progress (any JSON); sent within about 250 ms, the latest value winning."""
        self._progress(self, value)

    def extend_deadline(self, seconds: float) -> Optional[float]:
        """Asks the node to push the deadline to at least now + ``seconds`` (within the task's
        ``max_timeout_seconds``); returns the deadline granted (Unix seconds), None when no answer came."""
        return self._extend(self, seconds)

    # -- the worker's side --------------------------------------------------------------

    def _stop(self, reason: str) -> bool:
        """Sets ``cancelled`` with ``reason`` (the first reason wins); True when this call set it."""
        with self._lock:
            if self.reason is not None:
                return False
            self.reason = reason
        self.cancelled.set()
        return True

    def _move_deadline(self, deadline_at: Optional[str]) -> None:
        deadline = parse_time(deadline_at)
        if deadline is not None:
            self.deadline_at = deadline_at
            self.deadline = deadline

    @property
    def _reportable(self) -> bool:
        """A result for this attempt is still worth sending (the lease is held, the deadline not passed)."""
        return self.reason in (None, CANCELLED)
