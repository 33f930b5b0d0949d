#!/usr/bin/env python3
"""A Wheelhouse worker in Python, standard library only, on the HTTP worker routes.

It long-polls ``POST /api/workers/poll`` for tasks of the types it has handlers for, runs
each in a thread, heartbeats a task while its handler runs (``POST /api/tasks/{id}/heartbeat``,
at a third of the lease; heartbeats keep the worker's lease alive but never past the attempt's
deadline, ``timeout_seconds`` after the claim), and reports each result with its own
``POST /api/tasks/{id}/complete``. Connections are kept alive (one per thread).

    npm start                                  # a node on 127.0.0.1:7070
    python3 examples/python-worker/worker.py --url http://127.0.0.1:7070
    curl -s localhost:7070/api/tasks -H 'content-type: application/json' \\
      -d '{"task_type":"example.echo","payload":{"hello":"world"}}'

Flags: --url (default $WHEELHOUSE_URL or http://127.0.0.1:7070), --token (a bearer token
with the work scope, or $WHEELHOUSE_API_KEY), --concurrency (tasks at once, default 10),
--worker-id, --max-tasks (stop after that many results; default: run until Ctrl-C).

Handlers (see HANDLERS below): ``example.echo`` prints its payload and succeeds;
``example.sleep`` asks for its deadline to be pushed to the time it needs (``task["extend"]``,
within the task's ``max_timeout_seconds``), sleeps ``payload["seconds"]`` (heartbeating
meanwhile) and succeeds;
``example.fail`` raises, and with ``payload["retryable"] is False`` fails for good.
"""

import argparse
import http.client
import json
import os
import socket
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime


class Permanent(Exception):
    """Raised by a handler: the task fails for good (no retry)."""


def echo(payload, task):
    print(f"echo {task['task_id']}: {json.dumps(payload)}", flush=True)


def sleep(payload, task):
    seconds = float((payload or {}).get("seconds", 1))
    task["extend"](seconds + 1)
    time.sleep(seconds)


def fail(payload, task):
    if (payload or {}).get("retryable") is False:
        raise Permanent("asked to fail for good")
    raise RuntimeError("asked to fail")


HANDLERS = {"example.echo": echo, "example.sleep": sleep, "example.fail": fail}


class LeaseLost(Exception):
    """The node answered 409: this worker no longer holds the task's lease."""


class Api:
    """JSON over one kept-alive connection per thread; 429/503 waited out per Retry-After."""

    def __init__(self, url, token):
        parsed = urllib.parse.urlsplit(url)
        self.host = parsed.hostname or "127.0.0.1"
        self.port = parsed.port or (443 if parsed.scheme == "https" else 80)
        self.https = parsed.scheme == "https"
        self.headers = {"content-type": "application/json"}
        if token:
            self.headers["authorization"] = f"Bearer {token}"
        self.local = threading.local()

    def _connection(self, timeout):
        conn = getattr(self.local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
            conn = cls(self.host, self.port, timeout=timeout)
            self.local.conn = conn
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def post(self, path, body, timeout=10.0):
        data = json.dumps(body).encode()
        for attempt in range(20):
            conn = self._connection(timeout)
            try:
                conn.request("POST", path, body=data, headers=self.headers)
                res = conn.getresponse()
                text = res.read()
            except (OSError, http.client.HTTPException):
                # The kept-alive connection was closed (or the node is restarting): a new one.
                conn.close()
                self.local.conn = None
                time.sleep(min(5.0, 0.1 * 2**attempt))
                continue
            if res.status in (429, 503):
                time.sleep(float(res.getheader("retry-after") or 1))
                continue
            answer = json.loads(text) if text else None
            if res.status == 409:
                raise LeaseLost(answer)
            if res.status >= 400:
                raise RuntimeError(f"POST {path} answered {res.status}: {answer}")
            return answer
        raise RuntimeError(f"POST {path}: gave up after 20 attempts")


def unix_seconds(text):
    """An ISO-8601 UTC time as the node writes it (``2026-11-30T12:00:00.000Z``) → Unix seconds."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class Worker:
    def __init__(self, api, worker_id, concurrency, max_tasks):
        self.api = api
        self.worker_id = worker_id
        self.concurrency = concurrency
        self.max_tasks = max_tasks
        self.free = threading.Semaphore(concurrency)
        self.lock = threading.Lock()
        self.results = 0
        self.taken = 0
        self.stopping = threading.Event()

    def run(self):
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            while not self.stopping.is_set():
                self.free.acquire()
                free = 1
                while free < self.concurrency and self.free.acquire(blocking=False):
                    free += 1
                if self.max_tasks is not None:
                    with self.lock:
                        wanted = min(free, self.max_tasks - self.taken)
                    if wanted <= 0:
                        break
                    for _ in range(free - wanted):
                        self.free.release()
                    free = wanted
                answer = self.api.post(
                    "/api/workers/poll",
                    {
                        "worker_id": self.worker_id,
                        "task_types": sorted(HANDLERS),
                        "max_tasks": free,
                        "wait_ms": 20000,
                    },
                    timeout=30.0,
                )
                tasks = answer["tasks"]
                with self.lock:
                    self.taken += len(tasks)
                for _ in range(free - len(tasks)):
                    self.free.release()
                for task in tasks:
                    pool.submit(self.execute, task)

    def execute(self, task):
        done = threading.Event()
        task["extend"] = lambda seconds: self.extend(task, seconds)
        beat = threading.Thread(target=self.heartbeat, args=(task, done), daemon=True)
        beat.start()
        outcome = {"status": "succeeded"}
        try:
            HANDLERS[task["task_type"]](task.get("payload"), task)
        except Permanent as error:
            outcome = {"status": "failed", "error": str(error), "retryable": False}
        except Exception as error:  # noqa: BLE001 - any handler error is the attempt's failure
            outcome = {"status": "failed", "error": f"{type(error).__name__}: {error}", "retryable": True}
        finally:
            done.set()
        try:
            self.api.post(f"/api/tasks/{task['task_id']}/complete", {"lease_token": task["lease_token"], **outcome})
            print(f"{task['task_id']} {outcome['status']}", flush=True)
        except LeaseLost:
            print(f"{task['task_id']} lease lost: result discarded", flush=True)
        finally:
            with self.lock:
                self.results += 1
                if self.max_tasks is not None and self.results >= self.max_tasks:
                    self.stopping.set()
            self.free.release()

    def extend(self, task, seconds):
        """Asks the node to push the attempt's deadline to at least now + seconds; answers the deadline granted."""
        answer = self.api.post(
            f"/api/tasks/{task['task_id']}/heartbeat", {"lease_token": task["lease_token"], "extend_seconds": seconds}
        )
        return answer["deadline_at"]

    def heartbeat(self, task, done):
        """Extends the lease at a third of what is left of it, until the handler returns."""
        expires = unix_seconds(task["lease_expires_at"])
        while True:
            wait = max(0.05, (expires - time.time()) / 3)
            if done.wait(wait):
                return
            try:
                answer = self.api.post(f"/api/tasks/{task['task_id']}/heartbeat", {"lease_token": task["lease_token"]})
            except LeaseLost:
                print(f"{task['task_id']} lease lost while running", flush=True)
                return
            expires = unix_seconds(answer["lease_expires_at"])
            if answer.get("cancel_requested"):
                print(f"{task['task_id']} cancel requested", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=os.environ.get("WHEELHOUSE_URL", "http://127.0.0.1:7070"))
    parser.add_argument("--token", default=os.environ.get("WHEELHOUSE_API_KEY"))
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--worker-id", default=f"py-{socket.gethostname()}-{os.getpid()}")
    parser.add_argument("--max-tasks", type=int, default=None)
    args = parser.parse_args()
    worker = Worker(Api(args.url, args.token), args.worker_id, args.concurrency, args.max_tasks)
    print(f"worker {args.worker_id} polling {args.url} for {', '.join(sorted(HANDLERS))}", flush=True)
    try:
        worker.run()
    except KeyboardInterrupt:
        worker.stopping.set()
    return 0


if __name__ == "__main__":
    sys.exit(main())
