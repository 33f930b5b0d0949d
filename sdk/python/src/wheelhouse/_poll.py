"""The worker over the HTTP worker routes (docs/api.md, "Workers over HTTP"): the fallback when a
node answers the channel's upgrade with 404, or ``transport="http"``.

A poller long-polls ``POST /api/workers/poll`` for at most as many tasks as there are free
slots (and none while results pile up: more than two slots' worth not yet delivered); each
running task's lease is heartbeated at a third of what is left of it (one heartbeat thread for
all), which also carries its progress and tells of a cancel (``cancel_requested``) or a lost
lease (409); results go back in batches (``POST /api/workers/complete``, up to ``max_batch``,
after ``linger`` seconds), retried until their lease would have run out. A node restart is a
few failed requests: polls back off, heartbeats and results are retried, the leases live on in
the store.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ._http import Transport, backoff
from ._runner import Handler, OnError, Runner
from .context import CANCELLED, DEADLINE, LEASE_LOST, STOPPING, TaskContext, lost_reason, parse_time
from .errors import ApiError, ConflictError, NetworkError

UNREPORTED_PER_SLOT = 2
#: A result is still worth delivering this long after its lease's last known expiry, seconds.
DELIVERY_GRACE = 5.0
PROGRESS_LINGER = 0.25


class _Lease:
    __slots__ = ("ctx", "expires", "next_beat", "progress", "has_progress")

    def __init__(self, ctx: TaskContext, expires: float) -> None:
        self.ctx = ctx
        self.expires = expires
        self.next_beat = time.time() + max(0.05, (expires - time.time()) / 3)
        self.progress: Any = None
        self.has_progress = False


class PollRunner(Runner):
    def __init__(
        self,
        url: str,
        handlers: Mapping[str, Handler],
        *,
        worker_id: str,
        token: Optional[str],
        concurrency: int,
        linger: float,
        max_batch: int,
        poll_wait: float,
        on_error: OnError,
    ) -> None:
        super().__init__(handlers, concurrency, on_error)
        self.worker_id = worker_id
        self.linger = linger
        self.max_batch = max_batch
        self.poll_wait = poll_wait
        # Polls on a transport of their own, so that stopping can end the one in flight.
        self.polls = Transport(url, token, timeout=poll_wait + 15, retries=0)
        self.http = Transport(url, token, timeout=15, retries=0)
        self.wake = threading.Condition(self.lock)
        self.taking = False
        self.finished = False
        self.reserved = 0
        self.leases: Dict[str, _Lease] = {}
        #: Results to send: (wire, deliver-by Unix seconds).
        self.outbox: List[Tuple[Dict[str, Any], float]] = []
        self.first_waiting = 0.0
        self.threads: List[threading.Thread] = []

    def start(self) -> None:
        self.taking = True
        for target, name in (
            (self._poll_loop, "wheelhouse-poll"),
            (self._beat_loop, "wheelhouse-heartbeat"),
            (self._report_loop, "wheelhouse-report"),
        ):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self.threads.append(thread)

    def stop(self, grace: Optional[float]) -> None:
        with self.lock:
            self.taking = False
            self.wake.notify_all()
        end = time.monotonic() + 5
        while self.threads[0].is_alive() and time.monotonic() < end:
            self.polls.abort_all()  # the long-poll in flight ends at once
            self.threads[0].join(0.2)
        if not self.wait_idle(grace):
            # The grace ran out: each running task is handed back as failed and retryable.
            with self.lock:
                left = list(self.running.values())
                self.running.clear()
                self.stats["handed_back"] += len(left)
            for ctx in left:
                ctx._stop(STOPPING)
                self._queue({
                    "task_id": ctx.task_id,
                    "lease_token": ctx.lease_token,
                    "status": "failed",
                    "error": "the worker stopped before the task finished",
                    "retryable": True,
                }, ctx)
        with self.lock:
            self.first_waiting = 0.0
            self.wake.notify_all()
            end = time.monotonic() + 30
            while self.outbox and time.monotonic() < end:
                self.wake.wait(0.1)
            self.finished = True
            self.wake.notify_all()
        for thread in self.threads[1:]:
            thread.join(5.0)
        self.pool.shutdown()
        self.polls.close()
        self.http.close()

    # -- polling -------------------------------------------------------------------------

    def _free(self) -> int:
        if len(self.outbox) >= UNREPORTED_PER_SLOT * self.concurrency:
            return 0
        return self.concurrency - len(self.running) - self.reserved

    def _poll_loop(self) -> None:
        failures = 0
        too_fast = 0
        while True:
            with self.lock:
                while self.taking and self._free() <= 0:
                    self.wake.wait(0.5)
                if not self.taking:
                    return
                want = min(1000, self._free())
                self.reserved += want
            sent = time.monotonic()
            try:
                _, answer = self.polls.send(
                    "POST",
                    "/api/workers/poll",
                    {
                        "worker_id": self.worker_id,
                        "task_types": self.task_types,
                        "max_tasks": want,
                        "wait_ms": int(self.poll_wait * 1000),
                    },
                )
                tasks: List[Dict[str, Any]] = answer.get("tasks") or []
                failures = 0
            except (ApiError, NetworkError) as error:
                with self.lock:
                    self.reserved -= want
                    if not self.taking:
                        return
                self.on_error(error, "poll")
                delay = error.retry_after if isinstance(error, ApiError) else None
                time.sleep(delay if delay is not None else backoff(failures))
                failures += 1
                continue
            with self.lock:
                self.reserved -= want
                self.stats["polls"] += 1
                now = time.time()
                for task in tasks:
                    ctx = self.context(task)
                    expires = parse_time(task.get("lease_expires_at")) or now + 30
                    self.leases[ctx.task_id] = _Lease(ctx, expires)
                    self.start_task(ctx)
                self.wake.notify_all()
            if not tasks and time.monotonic() - sent < 0.05:
                time.sleep(backoff(min(too_fast, 3)))
                too_fast += 1
            else:
                too_fast = 0

    # -- heartbeats ----------------------------------------------------------------------

    def _beat_loop(self) -> None:
        while True:
            with self.lock:
                if self.finished:
                    return
                now = time.time()
                due = [l for l in self.leases.values() if l.next_beat <= now]
                if not due:
                    nxt = min([l.next_beat for l in self.leases.values()] + [now + 0.1])
                    self.wake.wait(max(0.01, min(0.1, nxt - now)))
            self.check_deadlines()
            for lease in due:
                self._beat(lease)

    def _beat(self, lease: _Lease, extend: Optional[float] = None) -> Optional[Dict[str, Any]]:
        ctx = lease.ctx
        body: Dict[str, Any] = {"lease_token": ctx.lease_token}
        with self.lock:
            if lease.has_progress:
                body["progress"] = lease.progress
                lease.has_progress = False
        if extend is not None:
            body["extend_seconds"] = extend
        try:
            _, answer = self.http.send("POST", f"/api/tasks/{ctx.task_id}/heartbeat", body)
        except ConflictError:
            with self.lock:
                if self.leases.get(ctx.task_id) is not lease:
                    return None  # its result went out meanwhile: the lease ended with it
                del self.leases[ctx.task_id]
            if lost_reason(ctx) == DEADLINE:
                ctx._stop(DEADLINE)  # the node ended the attempt at its deadline
            elif ctx._stop(LEASE_LOST):
                with self.lock:
                    self.stats["leases_lost"] += 1
            return None
        except (ApiError, NetworkError) as error:
            self.on_error(error, f"heartbeat of task {ctx.task_id}")
            with self.lock:
                lease.next_beat = time.time() + max(0.2, min(2.0, (lease.expires - time.time()) / 3))
            return None
        with self.lock:
            lease.expires = parse_time(answer.get("lease_expires_at")) or lease.expires
            lease.next_beat = time.time() + max(0.05, (lease.expires - time.time()) / 3)
            ctx._move_deadline(answer.get("deadline_at"))
        if answer.get("cancel_requested"):
            ctx._stop(CANCELLED)
        return answer

    def send_progress(self, ctx: TaskContext, value: Any) -> None:
        with self.lock:
            lease = self.leases.get(ctx.task_id)
            if lease is None or lease.ctx is not ctx:
                return
            lease.progress = value
            lease.has_progress = True
            lease.next_beat = min(lease.next_beat, time.time() + PROGRESS_LINGER)
            self.wake.notify_all()

    def send_extend(self, ctx: TaskContext, seconds: float) -> Optional[float]:
        with self.lock:
            lease = self.leases.get(ctx.task_id)
        if lease is None:
            return None
        answer = self._beat(lease, extend=seconds)
        return None if answer is None else ctx.deadline

    # -- results -------------------------------------------------------------------------

    def report(self, ctx: TaskContext, outcome: Optional[Dict[str, Any]]) -> None:
        if outcome is None:
            with self.lock:
                self.leases.pop(ctx.task_id, None)
                self.wake.notify_all()
            return
        wire = {"task_id": ctx.task_id, "lease_token": ctx.lease_token}
        wire.update(outcome)
        self._queue(wire, ctx)

    def _queue(self, wire: Dict[str, Any], ctx: TaskContext) -> None:
        with self.lock:
            lease = self.leases.pop(ctx.task_id, None)
            expires = lease.expires if lease is not None else (ctx.deadline or time.time() + 60)
            if not self.outbox:
                self.first_waiting = time.monotonic()
            self.outbox.append((wire, expires + DELIVERY_GRACE))
            if len(self.outbox) >= self.max_batch:
                self.first_waiting = 0.0
            self.wake.notify_all()

    def _report_loop(self) -> None:
        failures = 0
        while True:
            with self.lock:
                while not self.finished and (not self.outbox or time.monotonic() < self.first_waiting + self.linger):
                    wait = 0.5 if not self.outbox else self.first_waiting + self.linger - time.monotonic()
                    self.wake.wait(max(0.001, wait))
                if self.finished and not self.outbox:
                    return
                now = time.time()
                expired = [w for w, by in self.outbox if by < now]
                batch = [(w, by) for w, by in self.outbox if by >= now][: self.max_batch]
                sent_ids = {id(w) for w, _ in batch}
                self.outbox = [(w, by) for w, by in self.outbox if by >= now and id(w) not in sent_ids]
                self.stats["discarded"] += len(expired)
                if self.outbox:
                    self.first_waiting = 0.0
                if self.finished and not batch:
                    return
            if not batch:
                continue
            try:
                _, answer = self.http.send("POST", "/api/workers/complete", {"results": [w for w, _ in batch]})
            except (ApiError, NetworkError) as error:
                self.on_error(error, f"reporting {len(batch)} result(s)")
                if isinstance(error, ApiError) and error.status < 500 and error.status != 429:
                    with self.lock:
                        self.stats["discarded"] += len(batch)
                        self.wake.notify_all()
                    continue
                with self.lock:
                    self.outbox = batch + self.outbox
                    self.first_waiting = 0.0
                time.sleep(backoff(failures))
                failures += 1
                continue
            failures = 0
            results = answer.get("results") or []
            with self.lock:
                self.stats["result_frames"] += 1
                for r in results:
                    self.stats["reported" if r.get("ok") else "discarded"] += 1
                self.wake.notify_all()
