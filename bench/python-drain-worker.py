"""The Python side of bench/python-drain.ts: a wheelhouse.Worker on the channel with a no-op
handler, which exits once the node has acknowledged N results.

    PYTHONPATH=sdk/python/src python3 bench/python-drain-worker.py URL TASK_TYPE N CONCURRENCY

Prints one JSON line: the drain's seconds (from the worker's start to the N-th ack) and the
process's CPU seconds over it."""

import json
import os
import sys
import time

from wheelhouse import Worker


def main() -> int:
    url, task_type, total, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    worker = Worker(
        url,
        {task_type: lambda ctx: None},
        token=os.environ.get("BENCH_ADMIN_TOKEN") or None,
        concurrency=concurrency,
        worker_id=f"bench-py-{os.getpid()}",
    )
    cpu = time.process_time()
    started = time.monotonic()
    worker.start()
    while worker.stats.get("reported", 0) + worker.stats.get("discarded", 0) < total:
        time.sleep(0.002)
    seconds = time.monotonic() - started
    cpu = time.process_time() - cpu
    stats = worker.stats
    worker.stop(5)
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "stats": stats}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
