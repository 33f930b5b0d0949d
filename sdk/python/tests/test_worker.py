"""The worker against a real node, on both paths: the worker channel (WebSocket) and HTTP
long-poll. Each case runs once per transport (``ChannelWorkerTest``, ``HttpWorkerTest``)."""

from __future__ import annotations

import threading
import time
import unittest
from typing import Any, Dict, List, Optional

from wheelhouse import CANCELLED, DEADLINE, PermanentError, TaskContext, Worker

from .support import TOKEN, URL, client, control, needs_control, needs_node, unique_type, until


class WorkerCases:
    transport = "channel"

    # set by unittest.TestCase
    assertEqual: Any
    assertTrue: Any
    assertIn: Any
    assertLessEqual: Any
    assertGreaterEqual: Any
    assertIsNone: Any

    def setUp(self) -> None:
        self.client = client()
        self.workers: List[Worker] = []
        self.errors: List[str] = []

    def tearDown(self) -> None:
        for worker in self.workers:
            worker.stop(0)
        self.client.close()

    def worker(self, handlers: Dict[str, Any], **options: Any) -> Worker:
        assert URL is not None
        worker = Worker(
            URL,
            handlers,
            token=TOKEN,
            transport=self.transport,
            on_error=lambda e, where: self.errors.append(f"{where}: {e}"),
            **options,
        )
        self.workers.append(worker)
        worker.start()
        return worker

    def status(self, task_id: str) -> Dict[str, Any]:
        return self.client.get(task_id)

    def test_runs_tasks_with_results_failures_and_credit_bounded_concurrency(self) -> None:
        task_type = unique_type(f"run{self.transport}")
        lock = threading.Lock()
        running = [0]
        peak = [0]
        seen: List[Optional[str]] = []

        def handler(ctx: TaskContext) -> Any:
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
                seen.append(ctx.traceparent)
            try:
                time.sleep(0.01)
                if ctx.payload["i"] == 0:
                    raise PermanentError("zero is refused")
                if ctx.payload["i"] == 1:
                    raise RuntimeError("one fails once")
                return {"double": ctx.payload["i"] * 2}
            finally:
                with lock:
                    running[0] -= 1

        worker = self.worker({task_type: handler}, concurrency=4)
        ids = [t["task_id"] for t in self.client.submit_batch([{"task_type": task_type, "payload": {"i": i}, "max_retries": 0} for i in range(60)])]
        until(lambda: worker.stats.get("reported") == 60, "60 results acknowledged", 60)
        tasks = [self.status(i) for i in ids]
        self.assertEqual(tasks[0]["status"], "failed")
        self.assertEqual(tasks[0]["last_error"], "zero is refused")
        self.assertEqual(tasks[1]["status"], "failed")
        self.assertIn("RuntimeError: one fails once", tasks[1]["last_error"])
        for i, task in enumerate(tasks[2:], start=2):
            self.assertEqual((task["status"], task["result"]), ("succeeded", {"double": i * 2}))
        self.assertLessEqual(peak[0], 4, "never more tasks at once than the concurrency")
        self.assertEqual(seen, [None] * 60, "a task without trace context has ctx.traceparent None")
        stats = worker.stats
        self.assertEqual((stats["succeeded"], stats["failed"], stats["discarded"]), (58, 2, 0))
        # Results go back in batches: fewer frames (or requests) than results.
        self.assertLessEqual(stats["result_frames"], 59)
        if self.transport == "channel":
            self.assertEqual((worker.transport, stats["polls"]), ("channel", 0))
        else:
            self.assertGreaterEqual(stats["polls"], 1)

    def test_a_cancel_reaches_the_running_handler(self) -> None:
        task_type = unique_type(f"cancel{self.transport}")
        started = threading.Event()
        reasons: List[Optional[str]] = []

        def handler(ctx: TaskContext) -> None:
            started.set()
            ctx.cancelled.wait(30)
            reasons.append(ctx.reason)
            ctx.check()

        self.worker({task_type: handler})
        task_id = self.client.submit(task_type, timeout_seconds=3)["task_id"]
        self.assertTrue(started.wait(20), "the task started")
        self.client.cancel(task_id)
        until(lambda: self.status(task_id)["status"] == "cancelled", "the task to end cancelled")
        self.assertEqual(reasons, [CANCELLED])

    def test_the_deadline_reaches_the_handler_and_extend_deadline_moves_it(self) -> None:
        task_type = unique_type(f"deadline{self.transport}")
        seen: List[Any] = []

        def handler(ctx: TaskContext) -> None:
            if ctx.payload == "extend":
                before = ctx.deadline
                granted = ctx.extend_deadline(5)
                seen.append(("extended", granted is not None and before is not None and granted > before + 2))
                ctx.progress({"step": 1})
                time.sleep(1.6)  # past the first deadline
                return None
            ctx.cancelled.wait(30)
            seen.append(("reason", ctx.reason, ctx.time_left() is not None and ctx.time_left() <= 0.2))
            return None

        self.worker({task_type: handler})
        late = self.client.submit(task_type, "wait", timeout_seconds=1, max_retries=0)["task_id"]
        until(lambda: self.status(late)["status"] == "failed", "the attempt to time out")
        until(lambda: seen, "the handler to hear of its deadline")
        self.assertEqual(seen[0], ("reason", DEADLINE, True))
        extended = self.client.submit(task_type, "extend", timeout_seconds=1, max_timeout_seconds=10, max_retries=0)["task_id"]
        until(lambda: self.status(extended)["status"] == "succeeded", "the extended task to succeed")
        self.assertEqual(seen[1], ("extended", True))
        task = self.status(extended)
        self.assertEqual((task["attempts"], task["progress"]), (1, {"step": 1}))

    @needs_control
    def test_a_node_restart_mid_run_and_every_task_completes_on_its_first_attempt(self) -> None:
        task_type = unique_type(f"restart{self.transport}")
        release = threading.Event()
        started: List[str] = []
        lock = threading.Lock()

        def handler(ctx: TaskContext) -> Dict[str, Any]:
            with lock:
                started.append(ctx.task_id)
            if ctx.payload < 3:
                release.wait(60)  # held across the restart
            return {"i": ctx.payload}

        worker = self.worker({task_type: handler}, concurrency=3)
        ids = [t["task_id"] for t in self.client.submit_batch([{"task_type": task_type, "payload": i} for i in range(3)])]
        until(lambda: len(started) == 3, "three tasks running")
        control("restart")
        more = [t["task_id"] for t in self.client.submit_batch([{"task_type": task_type, "payload": 3 + i} for i in range(5)])]
        if self.transport == "channel":
            until(lambda: worker.stats["reconnects"] >= 1, "a socket to the restarted node", 60)
        release.set()
        for task_id in ids + more:
            until(lambda: self.status(task_id)["status"] == "succeeded", f"task {task_id} to succeed", 60)
        for task_id in ids:
            self.assertEqual(self.status(task_id)["attempts"], 1, "the same attempt completed across the restart")
        self.assertEqual(worker.stats["leases_lost"], 0)
        self.assertEqual(sorted(started), sorted(ids + more), "each task ran once")


@needs_node
class ChannelWorkerTest(WorkerCases, unittest.TestCase):
    transport = "channel"


@needs_node
class HttpWorkerTest(WorkerCases, unittest.TestCase):
    transport = "http"


if __name__ == "__main__":
    unittest.main()
