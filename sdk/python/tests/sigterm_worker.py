"""A worker process for test_sigterm: ``python sigterm_worker.py URL TASK_TYPE TRANSPORT STOP_TIMEOUT``.

``quick`` tasks take a second; a ``stuck`` task runs until the worker gives it up. Prints
``started <task_id>`` as each starts, and ``stopped <stats as JSON>`` when ``run()`` returns."""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from wheelhouse import TaskContext, Worker


PRINT = threading.Lock()


def handler(ctx: TaskContext) -> object:
    with PRINT:  # one line a task: print() from several threads can interleave its text and newline
        sys.stdout.write(f"started {ctx.task_id}\n")
        sys.stdout.flush()
    if ctx.payload == "stuck":
        ctx.cancelled.wait(120)
        ctx.check()
    time.sleep(1.0)
    return {"done": ctx.payload}


def main() -> int:
    url, task_type, transport, stop_timeout = sys.argv[1:5]
    worker = Worker(
        url,
        {task_type: handler},
        token=os.environ.get("WHEELHOUSE_API_KEY"),
        transport=transport,
        concurrency=4,
        stop_timeout=float(stop_timeout),
        poll_wait=2.0,  # over HTTP: a short long-poll, so that a poll that missed a task asks again soon
    )
    stats = worker.run()
    print(f"stopped {json.dumps(stats)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
