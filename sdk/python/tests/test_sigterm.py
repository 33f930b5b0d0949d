"""SIGTERM stops a worker process gracefully, on both paths: it takes no more tasks, lets the
running ones finish and delivers their results, hands back the one that outlives the grace,
and exits 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import unittest
from typing import List

from .support import URL, client, needs_node, unique_type, until

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sigterm_worker.py")


class SigtermCases:
    transport = "channel"
    assertEqual: object
    assertIn: object

    def test_sigterm_finishes_running_tasks_hands_back_the_stuck_one_and_exits_0(self) -> None:
        c = client()
        task_type = unique_type(f"sigterm{self.transport}")
        # One batch: the four are ready together, so the worker takes all of them at once.
        batch = [{"task_type": task_type, "payload": p, "timeout_seconds": 120, "max_retries": 3} for p in ("quick",) * 3 + ("stuck",)]
        *quick, stuck = [t["task_id"] for t in c.submit_batch(batch)]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        process = subprocess.Popen(
            [sys.executable, SCRIPT, str(URL), task_type, self.transport, "1.5"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        lines: List[str] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
        reader.start()
        try:
            try:
                until(lambda: "".join(lines).count("started ") == 4, "four tasks running", 30)
            except AssertionError as error:
                raise AssertionError(f"{error}; the worker wrote:\n{''.join(lines)}") from None
            process.send_signal(signal.SIGTERM)
            code = process.wait(30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        reader.join(5)
        output = "".join(lines)
        self.assertEqual(code, 0, output)  # type: ignore[operator]
        for task_id in quick:
            task = c.get(task_id)
            self.assertEqual((task["status"], task["attempts"], task["result"]), ("succeeded", 1, {"done": "quick"}), output)  # type: ignore[operator]
        # Handed back at once (not left to its 120 s lease): waiting for a worker again.
        until(lambda: c.get(stuck)["status"] in ("pending", "ready"), "the stuck task handed back", 10)
        stopped = [l for l in lines if l.startswith("stopped ")]
        stats = json.loads(stopped[0][len("stopped ") :])
        self.assertEqual((stats["succeeded"], stats["reported"], stats["handed_back"], stats["running"]), (3, 3 + (self.transport == "http"), 1, 0), output)  # type: ignore[operator]
        c.close()


@needs_node
class ChannelSigtermTest(SigtermCases, unittest.TestCase):
    transport = "channel"


@needs_node
class HttpSigtermTest(SigtermCases, unittest.TestCase):
    transport = "http"


if __name__ == "__main__":
    unittest.main()
