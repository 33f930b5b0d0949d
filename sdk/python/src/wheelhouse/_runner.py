"""What both worker transports share: the handler pool, the running tasks, their outcomes,
deadlines and the counters."""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
import traceback
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from .context import CANCELLED, DEADLINE, TaskContext
from .errors import PermanentError, TaskCancelled

Handler = Callable[[TaskContext], Any]
OnError = Callable[[BaseException, str], None]

#: Largest ``error`` text sent with a failed result (the node keeps 4 KiB).
MAX_ERROR_CHARS = 4000


def print_error(error: BaseException, context: str) -> None:
    print(f"wheelhouse worker: {context}: {error}", file=sys.stderr, flush=True)


def new_stats() -> Dict[str, int]:
    return {
        "succeeded": 0,  # handlers that returned
        "failed": 0,  # handlers that raised
        "reported": 0,  # results the node accepted
        "discarded": 0,  # results not sent or refused (lease lost, deadline passed, stopped)
        "leases_lost": 0,
        "reconnects": 0,  # sockets welcomed after the first
        "polls": 0,
        "result_frames": 0,  # results frames (channel) or batch requests (HTTP)
        "not_run": 0,  # tasks pushed after the worker began to close its socket
        "handed_back": 0,  # tasks still running when the stop's grace ran out
    }


def outcome_of(ctx: TaskContext, handler: Handler, on_error: OnError) -> Dict[str, Any]:
    """Runs the handler: the result's members (``status``, ``result`` or ``error``, ``retryable``)."""
    try:
        value = handler(ctx)
    except PermanentError as error:
        return {"status": "failed", "error": _text(error), "retryable": False}
    except TaskCancelled as error:
        return {"status": "failed", "error": f"stopped: {error.reason}", "retryable": True}
    except Exception as error:  # noqa: BLE001 - any handler error is the attempt's failure
        text = f"{type(error).__name__}: {_text(error)}"
        if ctx.reason is None:
            on_error(error, f"task {ctx.task_id} ({ctx.task_type}): {''.join(traceback.format_exception_only(type(error), error))}")
        return {"status": "failed", "error": text, "retryable": True}
    out: Dict[str, Any] = {"status": "succeeded"}
    if value is not None:
        try:
            json.dumps(value)
        except (TypeError, ValueError) as error:
            return {"status": "failed", "error": f"the handler's result is not JSON: {error}", "retryable": False}
        out["result"] = value
    return out


def _text(error: BaseException) -> str:
    return (str(error) or type(error).__name__)[:MAX_ERROR_CHARS]


class Pool:
    """Up to ``size`` daemon threads running submitted calls, started as they are needed.

    Not ``ThreadPoolExecutor``: its threads are joined when the interpreter exits, so a handler
    that never returns would keep a stopped worker's process alive; and it makes a ``Future`` per
    call that nothing here reads."""

    def __init__(self, size: int, name: str) -> None:
        self.size = size
        self.name = name
        self.calls: "queue.SimpleQueue[Optional[Tuple[Callable[[Any], None], Any]]]" = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.threads = 0
        self.idle = 0

    def submit(self, fn: Callable[[Any], None], arg: Any) -> None:
        self.calls.put((fn, arg))
        with self.lock:
            if self.idle > 0 or self.threads >= self.size:
                self.idle -= 1 if self.idle > 0 else 0
                return
            self.threads += 1
        threading.Thread(target=self._loop, name=f"{self.name}-{self.threads}", daemon=True).start()

    def _loop(self) -> None:
        while True:
            call = self.calls.get()
            if call is None:
                return
            fn, arg = call
            fn(arg)
            with self.lock:
                self.idle += 1

    def shutdown(self) -> None:
        """Each thread ends once the calls queued before have run."""
        with self.lock:
            threads = self.threads
        for _ in range(threads):
            self.calls.put(None)


class Runner:
    """Runs handlers in a pool of ``concurrency`` threads; a subclass takes the tasks and reports."""

    def __init__(
        self,
        handlers: Mapping[str, Handler],
        concurrency: int,
        on_error: OnError,
    ) -> None:
        self.handlers = dict(handlers)
        self.task_types = sorted(self.handlers)
        self.concurrency = concurrency
        self.on_error = on_error
        self.stats = new_stats()
        self.lock = threading.RLock()
        #: Tasks whose handler runs (or is about to), by id.
        self.running: Dict[str, TaskContext] = {}
        self.idle = threading.Condition(self.lock)
        self.pool = Pool(concurrency, "wheelhouse-task")

    # subclass hooks ----------------------------------------------------------------------

    def report(self, ctx: TaskContext, outcome: Optional[Dict[str, Any]]) -> None:
        """The handler ended: ``outcome`` to send, or None when no result is to be sent. Called
        with ``ctx`` already out of ``running``."""
        raise NotImplementedError

    def send_progress(self, ctx: TaskContext, value: Any) -> None:
        raise NotImplementedError

    def send_extend(self, ctx: TaskContext, seconds: float) -> Optional[float]:
        raise NotImplementedError

    # ------------------------------------------------------------------------------------

    def context(self, task: Mapping[str, Any]) -> TaskContext:
        return TaskContext(task, lambda c, v: self.send_progress(c, v), lambda c, s: self.send_extend(c, s))

    def start_task(self, ctx: TaskContext) -> None:
        """Holds a slot for ``ctx`` (under ``lock``) and runs its handler in the pool."""
        self.running[ctx.task_id] = ctx
        self.pool.submit(self._execute, ctx)

    def _execute(self, ctx: TaskContext) -> None:
        handler = self.handlers.get(ctx.task_type)
        if handler is None:
            outcome: Dict[str, Any] = {
                "status": "failed",
                "error": f"no handler for task type {ctx.task_type}",
                "retryable": True,
            }
        else:
            outcome = outcome_of(ctx, handler, self.on_error)
        with self.lock:
            if outcome["status"] == "succeeded":
                self.stats["succeeded"] += 1
            else:
                self.stats["failed"] += 1
            if self.running.get(ctx.task_id) is not ctx:
                return  # handed back at the stop's grace: its slot and lease are gone already
            del self.running[ctx.task_id]
            reportable = ctx._reportable
            if not reportable:
                self.stats["discarded"] += 1
            self.idle.notify_all()
        try:
            self.report(ctx, outcome if reportable else None)
        except Exception as error:  # noqa: BLE001
            self.on_error(error, f"reporting task {ctx.task_id}")

    def check_deadlines(self) -> None:
        """Sets ``cancelled`` (``deadline``) on every running task past its deadline."""
        now = time.time()
        with self.lock:
            late = [c for c in self.running.values() if c.deadline is not None and c.deadline <= now]
        for ctx in late:
            if ctx._stop(DEADLINE):
                pass

    def cancel(self, task_ids: List[str]) -> None:
        with self.lock:
            found = [self.running.get(t) for t in task_ids]
        for ctx in found:
            if ctx is not None:
                ctx._stop(CANCELLED)

    def wait_idle(self, timeout: Optional[float]) -> bool:
        """Waits until no handler runs, at most ``timeout`` seconds (None: no limit); True when idle."""
        end = None if timeout is None else time.monotonic() + timeout
        with self.lock:
            while self.running:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self.idle.wait(0.1 if left is None else min(0.1, left))
        return True
