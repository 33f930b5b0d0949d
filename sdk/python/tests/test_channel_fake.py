"""The channel worker against a scripted node end written here (no Wheelhouse node): credit,
batched results, a dropped socket resumed, cancel and lost leases. The real node's tests are
test_worker.py; these pin the worker's side of the protocol where a fault is easy to script."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
import unittest
import uuid
from typing import Any, Dict, List, Optional

from wheelhouse import CANCELLED, LEASE_LOST, TaskContext, Worker
from wheelhouse._ws import OP_TEXT, Closed, WebSocket

from .test_ws import Server, read_client_frame, server_frame
from .support import until


class FakeNode:
    """Accepts sockets one after another; each: reads hello, welcomes, pushes ``tasks`` within the credit."""

    def __init__(self, tasks: int, resumable: bool = True, store_out_frames: int = 0) -> None:
        self.pending = [{"task_id": str(uuid.uuid4()), "task_type": "t", "payload": i, "attempt": 1,
                         "lease_token": f"lt-{i}", "lease_expires_at": "2099-01-01T00:00:00.000Z",
                         "deadline_at": "2099-01-01T00:00:00.000Z", "timeout_seconds": 60} for i in range(tasks)]
        self.resumable = resumable
        #: The first this many ``results`` frames are answered as a node whose store is out.
        self.store_out_frames = store_out_frames
        self.refused_frames = 0
        self.hellos: List[Dict[str, Any]] = []
        self.results: Dict[str, Dict[str, Any]] = {}
        self.results_frames = 0
        self.in_flight = 0  # pushed and not yet resulted, on the current socket
        self.peak_over_credit = 0
        self.lock = threading.Lock()
        self.conn: Optional[socket.socket] = None
        self.server = Server()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.port}"

    def send(self, frame: Dict[str, Any]) -> None:
        assert self.conn is not None
        self.conn.sendall(server_frame(OP_TEXT, json.dumps(frame).encode()))

    def drop(self) -> None:
        """Ends the TCP connection without a close frame (a node that died)."""
        assert self.conn is not None
        self.conn.shutdown(socket.SHUT_RDWR)

    def _serve(self) -> None:
        while True:
            try:
                self.server.accept()
            except OSError:
                return
            if self.conn is not None:
                self.conn.close()
            self.conn = self.server.conn
            self.conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as the node's sockets
            try:
                self._session()
            except (EOFError, OSError):
                pass

    def _session(self) -> None:
        credit = 0
        assert self.conn is not None
        while True:
            _, opcode, _, payload = read_client_frame(self.conn)
            if opcode == 0x8:
                self.conn.sendall(server_frame(0x8, payload[:2]))  # the close handshake's echo
                return
            if opcode != OP_TEXT:
                continue
            frame = json.loads(payload)
            with self.lock:
                if frame["type"] == "hello":
                    self.hellos.append(frame)
                    credit = frame["credits"]
                    resumed = [r["task_id"] for r in frame.get("resume") or []] if self.resumable else []
                    self.send({"type": "welcome", "node_id": "fake", "heartbeat_ms": 5000, "resumed": resumed})
                elif frame["type"] == "credit":
                    credit += frame["n"]
                elif frame["type"] == "results" and self.refused_frames < self.store_out_frames:
                    self.refused_frames += 1
                    out = {"code": "store_unavailable", "message": "The node cannot reach its database right now."}
                    self.send({"type": "acks", "acks": [{"task_id": r["task_id"], "ok": False, "error": out} for r in frame["results"]]})
                elif frame["type"] == "results":
                    self.results_frames += 1
                    for r in frame["results"]:
                        self.results[r["task_id"]] = r
                    self.send({"type": "acks", "acks": [{"task_id": r["task_id"], "ok": True} for r in frame["results"]]})
                n = min(credit, len(self.pending))
                if n > 0:
                    batch, self.pending = self.pending[:n], self.pending[n:]
                    credit -= n
                    self.send({"type": "tasks", "tasks": batch})

    def close(self) -> None:
        self.server.listener.close()
        if self.conn is not None:
            self.conn.close()


class FakeChannelTest(unittest.TestCase):
    def test_drains_within_the_credit_and_batches_results(self) -> None:
        node = FakeNode(200)
        lock = threading.Lock()
        running = [0, 0]

        def handler(ctx: TaskContext) -> Any:
            with lock:
                running[0] += 1
                running[1] = max(running[1], running[0])
            time.sleep(0.002)
            with lock:
                running[0] -= 1
            return ctx.payload

        worker = Worker(node.url, {"t": handler}, concurrency=8, worker_id="fake-1")
        worker.start()
        try:
            until(lambda: worker.stats["reported"] == 200, "200 results acknowledged")
            self.assertEqual(node.hellos[0]["credits"], 8)
            self.assertEqual(node.hellos[0]["task_types"], ["t"])
            self.assertLessEqual(running[1], 8)
            self.assertLess(node.results_frames, 200, "results share frames")
            self.assertEqual(sorted(r["result"] for r in node.results.values()), list(range(200)))
            self.assertEqual(worker.stats["discarded"], 0)
        finally:
            worker.stop(2)
            node.close()

    def test_a_dropped_socket_is_resumed_and_the_running_task_reports_on_the_next(self) -> None:
        node = FakeNode(1)
        release = threading.Event()
        worker = Worker(node.url, {"t": lambda ctx: release.wait(20) and "done"}, concurrency=2, on_error=lambda e, w: None)
        worker.start()
        try:
            until(lambda: worker.stats.get("running") == 1, "the task running")
            node.drop()
            until(lambda: len(node.hellos) == 2, "a second hello")
            resume = node.hellos[1]["resume"]
            self.assertEqual(len(resume), 1)
            self.assertEqual(resume[0]["lease_token"], "lt-0")
            self.assertEqual(node.hellos[1]["credits"], 1, "the running task's slot is not granted")
            release.set()
            until(lambda: len(node.results) == 1, "the result on the new socket")
            self.assertEqual(list(node.results.values())[0]["result"], "done")
            until(lambda: worker.stats["reconnects"] == 1 and worker.stats["reported"] == 1, "stats")
        finally:
            worker.stop(2)
            node.close()

    def test_a_result_the_node_could_not_record_is_sent_again_until_it_is(self) -> None:
        node = FakeNode(1, store_out_frames=2)
        errors: List[str] = []
        worker = Worker(node.url, {"t": lambda ctx: "done"}, on_error=lambda e, w: errors.append(str(e)))
        worker.start()
        try:
            until(lambda: worker.stats["reported"] == 1, "the result recorded")
            self.assertEqual(node.refused_frames, 2)
            self.assertEqual(list(node.results.values())[0]["result"], "done")
            self.assertEqual(worker.stats["discarded"], 0)
            self.assertEqual(len([e for e in errors if "sending them again" in e]), 2)
        finally:
            worker.stop(2)
            node.close()

    def test_a_lease_the_welcome_leaves_out_is_lost_and_its_result_not_sent(self) -> None:
        node = FakeNode(1, resumable=False)
        reasons: List[Optional[str]] = []

        def handler(ctx: TaskContext) -> None:
            ctx.cancelled.wait(20)
            reasons.append(ctx.reason)

        worker = Worker(node.url, {"t": handler}, on_error=lambda e, w: None)
        worker.start()
        try:
            until(lambda: worker.stats.get("running") == 1, "the task running")
            node.drop()
            until(lambda: reasons, "the handler told")
            self.assertEqual(reasons, [LEASE_LOST])
            until(lambda: worker.stats["running"] == 0, "the slot freed")
            self.assertEqual(node.results, {})
            self.assertEqual((worker.stats["leases_lost"], worker.stats["discarded"]), (1, 1))
        finally:
            worker.stop(2)
            node.close()

    def test_cancel_reaches_the_handler_and_its_result_is_still_reported(self) -> None:
        node = FakeNode(1)
        reasons: List[Optional[str]] = []

        def handler(ctx: TaskContext) -> str:
            ctx.cancelled.wait(20)
            reasons.append(ctx.reason)
            return "stopped"

        worker = Worker(node.url, {"t": handler})
        worker.start()
        try:
            until(lambda: worker.stats.get("running") == 1, "the task running")
            with node.lock:
                task_id = next(iter(worker._runner.running))  # type: ignore[union-attr]
                node.send({"type": "cancel", "task_ids": [task_id]})
            until(lambda: node.results, "the result")
            self.assertEqual(reasons, [CANCELLED])
            self.assertEqual(node.results[task_id]["status"], "succeeded")
        finally:
            worker.stop(2)
            node.close()


class OldNode(http.server.ThreadingHTTPServer):
    """A node without the channel: 404 to the upgrade, one task from the long-poll, results taken."""

    daemon_threads = True

    def __init__(self) -> None:
        self.upgrades = 0
        self.polls: List[Dict[str, Any]] = []
        self.completed: List[Dict[str, Any]] = []
        self.task = {"task_id": str(uuid.uuid4()), "task_type": "t", "payload": 7, "attempt": 1, "lease_token": "lt",
                     "lease_expires_at": "2099-01-01T00:00:00.000Z", "deadline_at": "2099-01-01T00:00:00.000Z"}
        node = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def answer(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                node.upgrades += 1
                self.answer(404, {"error": {"code": "route_not_found", "message": "no such route"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                if self.path == "/api/workers/poll":
                    node.polls.append(body)
                    tasks = [node.task] if len(node.polls) == 1 else []
                    if not tasks:
                        time.sleep(0.05)
                    self.answer(200, {"tasks": tasks})
                elif self.path == "/api/workers/complete":
                    node.completed.extend(body["results"])
                    self.answer(200, {"results": [{"task_id": r["task_id"], "ok": True} for r in body["results"]]})
                else:
                    self.answer(404, {"error": {"code": "route_not_found", "message": self.path}})

        super().__init__(("127.0.0.1", 0), Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a long-poll the stopping worker hung up on


class FallbackTest(unittest.TestCase):
    def test_a_node_that_answers_the_upgrade_404_gets_the_long_poll(self) -> None:
        node = OldNode()
        threading.Thread(target=node.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{node.server_address[1]}"
        errors: List[str] = []
        worker = Worker(url, {"t": lambda ctx: ctx.payload * 2}, concurrency=3, on_error=lambda e, w: errors.append(w))
        worker.start()
        try:
            until(lambda: node.completed, "the result")
            self.assertEqual(node.upgrades, 1)
            self.assertEqual(worker.transport, "http")
            self.assertEqual(node.completed[0]["status"], "succeeded")
            self.assertEqual(node.completed[0]["result"], 14)
            self.assertEqual(node.polls[0]["task_types"], ["t"])
            self.assertEqual(node.polls[0]["max_tasks"], 3)
            self.assertTrue(any("falls back" in e for e in errors), errors)
            until(lambda: worker.stats["reported"] == 1, "the result acknowledged")
        finally:
            worker.stop(1)
            node.shutdown()
            node.server_close()


if __name__ == "__main__":
    unittest.main()
