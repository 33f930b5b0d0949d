"""The worker on the worker channel (docs/api.md, "Workers as remote actors"): one WebSocket to a
node, over which the node pushes tasks within the credit granted and the worker sends results
back in batches.

Credit: ``hello`` grants every free slot; each pushed task uses one; a finished task's slot is
granted again (a ``credit`` frame) with the next batch of results, unless results not yet
acknowledged pile up (more than two slots' worth each). A task pushed beyond the credit is not
run: it is reported failed and retryable.

Batching: results that finish within ``linger`` seconds of each other share one ``results``
frame (at most ``max_batch``); progress values wait 250 ms, the latest of each task winning.
No heartbeats: the node keeps the worker's leases alive while the socket lives; the worker
pings every ``heartbeat_ms`` the welcome names, and drops a socket on which nothing was heard
for a whole period.

Reconnect: a lost socket is replaced by one to the next node of the list, with backoff; its
``hello`` resumes the leases still held (running tasks, and results not acknowledged), results
not acknowledged are sent again, and a running task the welcome's ``resumed`` leaves out has
lost its lease (``ctx.cancelled``, reason ``lease_lost``; its result is not sent).

Stop: ``goodbye`` (no more tasks), running handlers finish within the grace, their results go
out and are acknowledged, then the worker closes the socket; a task still running when the
grace runs out is handed back by that close (the node puts it back in its queue at once, its
attempt not counted).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ._http import backoff, headers_of
from ._runner import Handler, OnError, Runner
from ._ws import OP_TEXT, Closed, UpgradeRefused, WebSocket, WebSocketError
from .context import DEADLINE, LEASE_LOST, STOPPING, TaskContext, lost_reason
from .errors import WheelhouseError

#: The codes of an ``ok: false`` ack that mean the node could not record the result now (its
#: store out) and kept the lease: the result is sent again after a backoff. ``lease_lost`` is final.
SEND_AGAIN = frozenset({"store_unavailable", "not_ready", "ask_timeout", "mailbox_full", "stale_epoch", "internal"})

#: Results awaiting acknowledgement allowed per slot before credit is held back.
UNREPORTED_PER_SLOT = 2
#: Most leases one ``hello`` may resume (the node refuses more).
MAX_RESUME = 1000
#: How long progress values wait to share a frame, seconds.
PROGRESS_LINGER = 0.25
#: While stopping, how long the worker waits for an ack before it gives the node up, seconds.
ACK_PATIENCE = 10.0
#: Ping period when the welcome names none, seconds.
DEFAULT_HEARTBEAT = 5.0


class ChannelError(WheelhouseError):
    """An ``error`` frame from the node (the node closes the socket after it)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def channel_url(base: str) -> str:
    """``http://host:port/prefix`` → ``ws://host:port/prefix/api/workers/connect``."""
    if base.startswith("https:"):
        base = "wss:" + base[len("https:") :]
    elif base.startswith("http:"):
        base = "ws:" + base[len("http:") :]
    return base.rstrip("/") + "/api/workers/connect"


class ChannelRunner(Runner):
    def __init__(
        self,
        urls: Sequence[str],
        handlers: Mapping[str, Handler],
        *,
        worker_id: str,
        token: Optional[str],
        concurrency: int,
        linger: float,
        max_batch: int,
        on_error: OnError,
        on_fallback: Callable[[UpgradeRefused], None],
    ) -> None:
        super().__init__(handlers, concurrency, on_error)
        self.urls = list(urls)
        self.worker_id = worker_id
        self.token = token
        self.linger = linger
        self.max_batch = max_batch
        self.on_fallback = on_fallback
        self.wake = threading.Condition(self.lock)
        self.ws: Optional[WebSocket] = None
        self.welcomed = False
        self.ever_welcomed = False
        self.heartbeat = DEFAULT_HEARTBEAT
        self.heard = True
        self.taking = False
        self.stopping = False
        self.finished = False
        self.closing = False
        self.outstanding = 0
        #: Results not sent yet, and sent but not acknowledged: task id → (lease token, JSON text).
        self.waiting: Dict[str, Tuple[str, str]] = {}
        self.unacked: Dict[str, Tuple[str, str]] = {}
        self.first_waiting = 0.0
        #: ``acks`` frames in a row that asked for results to be sent again (their backoff grows).
        self.again_in_a_row = 0
        self.credit_due = False
        self.progress_waiting: Dict[str, Dict[str, Any]] = {}
        self.progress_since = 0.0
        self.extensions: Dict[str, Tuple[threading.Event, List[Optional[str]]]] = {}
        self.last_ack = time.monotonic()
        self.conn_thread: Optional[threading.Thread] = None
        self.pump_thread: Optional[threading.Thread] = None

    # -- life ------------------------------------------------------------------------------

    def start(self) -> None:
        self.taking = True
        self.conn_thread = threading.Thread(target=self._connect_loop, name="wheelhouse-channel", daemon=True)
        self.pump_thread = threading.Thread(target=self._pump, name="wheelhouse-pump", daemon=True)
        self.conn_thread.start()
        self.pump_thread.start()

    def stop(self, grace: Optional[float]) -> None:
        with self.lock:
            if self.stopping:
                return
            self.stopping = True
            self.taking = False
            ws = self.ws if self.welcomed else None
        if ws is not None:
            self._send(ws, '{"type":"goodbye"}')
        end = None if grace is None else time.monotonic() + grace
        while True:
            left = None if end is None else max(0.0, end - time.monotonic())
            idle = self.wait_idle(left)
            if not idle:
                self._hand_back()
            self._request_flush()
            self._settle()
            with self.lock:
                if not self.running or self.ws is None:
                    break
        with self.lock:
            self.closing = True
            ws = self.ws
            dropped = len(self.waiting) + len(self.unacked)
            self.stats["discarded"] += dropped
            self.waiting.clear()
            self.unacked.clear()
        if dropped:
            self.on_error(WheelhouseError(f"{dropped} result(s) dropped: not acknowledged before the channel closed"), "stopping")
        if ws is not None:
            ws.close(1000, "worker stopped")
        if self.conn_thread is not None:
            self.conn_thread.join(2.0)  # the node's echo of the close ends the reader
            if self.conn_thread.is_alive() and ws is not None:
                ws.shutdown()
                self.conn_thread.join(5.0)
        with self.lock:
            self.finished = True
            self.wake.notify_all()
        if self.pump_thread is not None:
            self.pump_thread.join(5.0)
        self.pool.shutdown()

    def _hand_back(self) -> None:
        """The grace ran out: running tasks are given up (their results will not be sent); the socket's close hands them back."""
        with self.lock:
            left = list(self.running.values())
            self.running.clear()
            self.stats["handed_back"] += len(left)
            self.idle.notify_all()
        for ctx in left:
            ctx._stop(STOPPING)

    def _settle(self) -> None:
        """Waits until every result is acknowledged, or the socket is gone, or the node acknowledged nothing for a while."""
        with self.lock:
            self.last_ack = time.monotonic()
            while (self.waiting or self.unacked) and self.ws is not None:
                if time.monotonic() - self.last_ack >= ACK_PATIENCE:
                    return
                self.wake.wait(0.1)

    # -- the socket ------------------------------------------------------------------------

    def _connect_loop(self) -> None:
        failures = 0
        index = 0
        refused_404: set = set()
        while True:
            with self.lock:
                if not self.taking:
                    return
            base = self.urls[index % len(self.urls)]
            index += 1
            try:
                ws = WebSocket.connect(channel_url(base), headers_of(self.token))
            except UpgradeRefused as error:
                if error.status == 404 and not self.ever_welcomed:
                    refused_404.add(base)
                    if len(refused_404) == len(self.urls):
                        with self.lock:
                            self.taking = False
                            self.finished = True  # the pump ends: an HTTP worker takes over
                            self.wake.notify_all()
                        self.on_fallback(error)
                        return
                self.on_error(error, f"connecting to {base}")
                time.sleep(backoff(failures))
                failures += 1
                continue
            except (OSError, WebSocketError) as error:
                with self.lock:
                    if not self.taking:
                        return
                self.on_error(error, f"connecting to {base}")
                time.sleep(backoff(failures))
                failures += 1
                continue
            if self._session(ws, base):
                failures = 0
            with self.lock:
                if not self.taking:
                    return
            time.sleep(backoff(failures))
            failures += 1

    def _session(self, ws: WebSocket, base: str) -> bool:
        """Says hello on ``ws`` and reads it until it closes; True when the node welcomed it."""
        with self.lock:
            if not self.taking:
                ws.close(1000, "worker stopping")
                ws.release()
                return False
            self.ws = ws
            self.welcomed = False
            self.heard = True
            self.outstanding = max(0, self.concurrency - len(self.running)) if self.taking else 0
            leases: Dict[str, str] = {c.task_id: c.lease_token for c in self.running.values() if c.reason is None}
            for task_id, (token, _) in list(self.unacked.items()) + list(self.waiting.items()):
                leases[task_id] = token
            resume = [{"task_id": t, "lease_token": k} for t, k in list(leases.items())[:MAX_RESUME]]
            hello = {
                "type": "hello",
                "worker_id": self.worker_id,
                "task_types": self.task_types,
                "credits": self.outstanding,
                "resume": resume,
            }
        welcomed = False
        try:
            ws.send_text(json.dumps(hello))
            while True:
                opcode, data = ws.recv()
                self.heard = True
                if opcode != OP_TEXT:
                    continue
                frame = json.loads(data)
                if frame.get("type") == "welcome":
                    welcomed = True
                self._receive(ws, frame)
        except Closed as closed:
            if closed.code not in (None, 1000) and not self.closing:
                self.on_error(closed, f"channel to {base}")
        except (WebSocketError, ValueError) as error:
            self.on_error(error, f"channel to {base}")
            ws.shutdown()
        finally:
            ws.release()
            self._detach(ws)
        return welcomed

    def _detach(self, ws: WebSocket) -> None:
        with self.lock:
            if self.ws is not ws:
                return
            self.ws = None
            self.welcomed = False
            self.outstanding = 0
            requeued = dict(self.unacked)
            requeued.update(self.waiting)
            self.waiting = requeued
            self.unacked.clear()
            for event, _ in self.extensions.values():
                event.set()
            self.wake.notify_all()

    def _send(self, ws: WebSocket, text: str) -> bool:
        try:
            ws.send_text(text)
            return True
        except WebSocketError:
            return False  # its reader sees the close and requeues what was not acknowledged

    # -- frames from the node --------------------------------------------------------------

    def _receive(self, ws: WebSocket, frame: Dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind == "tasks":
            self._pushed(frame.get("tasks") or [])
        elif kind == "acks":
            again = 0
            with self.lock:
                for ack in frame.get("acks") or []:
                    task_id = ack.get("task_id")
                    sent = self.unacked.pop(task_id, None)
                    if sent is None:
                        continue
                    if not ack.get("ok") and (ack.get("error") or {}).get("code") in SEND_AGAIN:
                        # The node could not record it now and kept the lease: dropped here, the
                        # task would run again once that lease ended.
                        self.waiting[task_id] = sent
                        again += 1
                        continue
                    self.stats["reported" if ack.get("ok") else "discarded"] += 1
                if again:
                    delay = backoff(self.again_in_a_row)
                    self.again_in_a_row += 1
                    self.first_waiting = max(self.first_waiting, time.monotonic() + delay - self.linger)
                elif any(ack.get("ok") for ack in frame.get("acks") or []):
                    self.again_in_a_row = 0
                self.last_ack = time.monotonic()
                self.credit_due = True
                self.wake.notify_all()
            if again:
                self.on_error(WheelhouseError(f"the node could not record {again} result(s); sending them again"), "reporting results")
        elif kind == "welcome":
            self._welcomed(ws, frame)
        elif kind == "cancel":
            self.cancel(list(frame.get("task_ids") or []))
        elif kind == "lease_lost":
            self._leases_lost(list(frame.get("task_ids") or []))
        elif kind == "extended":
            with self.lock:
                for t in frame.get("tasks") or []:
                    ctx = self.running.get(t.get("task_id"))
                    if ctx is not None:
                        ctx._move_deadline(t.get("deadline_at"))
                    waiter = self.extensions.get(t.get("task_id"))
                    if waiter is not None:
                        waiter[1][0] = t.get("deadline_at")
                        waiter[0].set()
        elif kind == "error":
            error = frame.get("error") or {}
            self.on_error(ChannelError(str(error.get("code")), str(error.get("message"))), "channel")

    def _welcomed(self, ws: WebSocket, frame: Dict[str, Any]) -> None:
        resumed = {r if isinstance(r, str) else str((r or {}).get("task_id")) for r in frame.get("resumed") or []}
        with self.lock:
            if self.ws is not ws:
                return
            self.welcomed = True
            if self.ever_welcomed:
                self.stats["reconnects"] += 1
            self.ever_welcomed = True
            beat = frame.get("heartbeat_ms")
            self.heartbeat = beat / 1000 if isinstance(beat, (int, float)) and beat > 0 else DEFAULT_HEARTBEAT
            lost = [c for c in self.running.values() if c.task_id not in resumed and c.reason is None]
            goodbye = self.stopping
            self.credit_due = True
            if self.waiting:
                self.first_waiting = 0.0  # send at once
            self.wake.notify_all()
        for ctx in lost:
            self._lose(ctx)
        if goodbye:
            self._send(ws, '{"type":"goodbye"}')

    def _pushed(self, tasks: List[Dict[str, Any]]) -> None:
        refused: List[Dict[str, Any]] = []
        with self.lock:
            if self.closing:
                # Pushed before the node read our close: it hands them on itself.
                self.stats["not_run"] += len(tasks)
                return
            for task in tasks:
                if task.get("task_id") in self.running:
                    self.on_error(WheelhouseError(f"task {task.get('task_id')} pushed while it runs here"), "channel")
                elif self.outstanding <= 0:
                    refused.append(task)
                else:
                    self.outstanding -= 1
                    self.start_task(self.context(task))
        for task in refused:
            self.on_error(WheelhouseError(f"task {task.get('task_id')} pushed beyond the credit granted: not run"), "channel")
            self._add_result(
                task["task_id"],
                task["lease_token"],
                {"status": "failed", "error": "pushed to the worker beyond the credit it granted; not run", "retryable": True},
            )

    def _leases_lost(self, task_ids: List[str]) -> None:
        for task_id in task_ids:
            with self.lock:
                ctx = self.running.get(task_id)
                dropped = ctx is None and self.waiting.pop(task_id, None) is not None
                if dropped:
                    self.stats["leases_lost"] += 1
                    self.stats["discarded"] += 1
            if ctx is not None:
                self._lose(ctx)

    def _lose(self, ctx: TaskContext) -> None:
        if lost_reason(ctx) == DEADLINE:
            ctx._stop(DEADLINE)  # the node ended the attempt at its deadline
        elif ctx._stop(LEASE_LOST):
            with self.lock:
                self.stats["leases_lost"] += 1
                self.progress_waiting.pop(ctx.task_id, None)

    # -- what goes out ---------------------------------------------------------------------

    def report(self, ctx: TaskContext, outcome: Optional[Dict[str, Any]]) -> None:
        if outcome is None:
            with self.lock:
                self.credit_due = True
                self.progress_waiting.pop(ctx.task_id, None)
                self.wake.notify_all()
            return
        self._add_result(ctx.task_id, ctx.lease_token, outcome)

    def _add_result(self, task_id: str, lease_token: str, outcome: Dict[str, Any]) -> None:
        wire = {"task_id": task_id, "lease_token": lease_token}
        wire.update(outcome)
        text = json.dumps(wire, separators=(",", ":"))
        with self.lock:
            if self.progress_waiting:
                self.progress_waiting.pop(task_id, None)
            first = not self.waiting
            if first:
                self.first_waiting = time.monotonic()
            self.waiting[task_id] = (lease_token, text)
            if len(self.waiting) >= self.max_batch or self.linger <= 0:
                self.first_waiting = 0.0
                first = True
            if first:
                # The pump sleeps until the first waiting result's linger ends: only that, or a
                # full batch, needs to wake it (not every result: a wake per task costs the GIL).
                self.wake.notify_all()

    def _request_flush(self) -> None:
        with self.lock:
            self.first_waiting = 0.0
            self.credit_due = True
            self.wake.notify_all()

    def send_progress(self, ctx: TaskContext, value: Any) -> None:
        with self.lock:
            if not ctx._reportable or self.running.get(ctx.task_id) is not ctx:
                return
            if not self.progress_waiting:
                self.progress_since = time.monotonic()
            self.progress_waiting[ctx.task_id] = {
                "task_id": ctx.task_id,
                "lease_token": ctx.lease_token,
                "progress": value,
            }
            self.wake.notify_all()

    def send_extend(self, ctx: TaskContext, seconds: float) -> Optional[float]:
        event = threading.Event()
        answer: List[Optional[str]] = [None]
        with self.lock:
            ws = self.ws if self.welcomed else None
            self.extensions[ctx.task_id] = (event, answer)
        try:
            if ws is None:
                return None
            update = {"task_id": ctx.task_id, "lease_token": ctx.lease_token, "extend_seconds": seconds}
            if not self._send(ws, json.dumps({"type": "progress", "updates": [update]})):
                return None
            event.wait(10.0)
            return ctx.deadline if answer[0] is not None else None
        finally:
            with self.lock:
                if self.extensions.get(ctx.task_id) == (event, answer):
                    del self.extensions[ctx.task_id]

    def _grantable(self) -> int:
        if not self.taking:
            return 0
        if len(self.waiting) + len(self.unacked) >= UNREPORTED_PER_SLOT * self.concurrency:
            return 0
        return max(0, self.concurrency - len(self.running) - self.outstanding)

    def _pump(self) -> None:
        """Sends results, credit and progress when due, pings, and watches deadlines."""
        next_ping = time.monotonic() + self.heartbeat
        next_deadlines = 0.0
        while True:
            frames: List[str] = []
            with self.lock:
                if self.finished:
                    return
                now = time.monotonic()
                ws = self.ws if self.welcomed else None
                timeout = min(next_ping, next_deadlines) - now
                if ws is not None:
                    if self.waiting:
                        timeout = min(timeout, self.first_waiting + self.linger - now)
                    if self.credit_due:
                        timeout = 0
                    if self.progress_waiting:
                        timeout = min(timeout, self.progress_since + PROGRESS_LINGER - now)
                if timeout > 0:
                    self.wake.wait(timeout)
                    if self.finished:
                        return
                    now = time.monotonic()
                    ws = self.ws if self.welcomed else None
                if ws is not None:
                    if self.waiting and now >= self.first_waiting + self.linger:
                        frames.extend(self._results_frames())
                    if self.credit_due or frames:
                        self.credit_due = False
                        n = self._grantable()
                        if n > 0:
                            self.outstanding += n
                            frames.append('{"type":"credit","n":%d}' % n)
                    if self.progress_waiting and now >= self.progress_since + PROGRESS_LINGER:
                        updates = list(self.progress_waiting.values())
                        self.progress_waiting.clear()
                        for i in range(0, len(updates), self.max_batch):
                            frames.append(json.dumps({"type": "progress", "updates": updates[i : i + self.max_batch]}))
            if ws is not None and frames:
                try:
                    ws.send_texts(frames)
                except WebSocketError:
                    pass  # its reader sees the close and requeues what was not acknowledged
            if now >= next_deadlines:
                next_deadlines = now + 0.1
                self.check_deadlines()
            if now >= next_ping:
                next_ping = now + self.heartbeat
                with self.lock:
                    ws = self.ws if self.welcomed else None
                    heard, self.heard = self.heard, False
                if ws is not None:
                    if not heard:
                        self.on_error(WheelhouseError("nothing heard from the node for a heartbeat period"), "channel")
                        ws.shutdown()
                    else:
                        try:
                            ws.ping()
                        except WebSocketError:
                            pass

    def _results_frames(self) -> List[str]:
        """The waiting results as ``results`` frames (moved to ``unacked``); under ``lock``."""
        frames: List[str] = []
        parts: List[str] = []
        for task_id, (token, text) in self.waiting.items():
            parts.append(text)
            self.unacked[task_id] = (token, text)
            if len(parts) == self.max_batch:
                frames.append('{"type":"results","results":[' + ",".join(parts) + "]}")
                parts = []
        if parts:
            frames.append('{"type":"results","results":[' + ",".join(parts) + "]}")
        self.waiting.clear()
        self.stats["result_frames"] += len(frames)
        return frames
