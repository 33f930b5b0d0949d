"""A worker: takes tasks of the types it has handlers for from a Wheelhouse cluster and runs them.

    from wheelhouse import Worker

    def send_email(ctx):
        ...                       # ctx.payload, ctx.cancelled, ctx.deadline, ctx.progress(...)
        return {"sent": True}     # the task's result (any JSON)

    Worker("http://127.0.0.1:7070", {"email.send": send_email}, token="...").run()

``run()`` blocks until SIGTERM or SIGINT (or ``stop()`` from another thread), then stops
gracefully: it takes no more tasks, lets running handlers finish within ``stop_timeout``
seconds, delivers their results, hands back what is still running, and returns.

By default it holds the worker channel (a WebSocket, ``GET /api/workers/connect``) and falls
back to HTTP long-poll against nodes that answer the upgrade with 404; ``transport="http"``
long-polls from the start.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import threading
from typing import Any, Dict, Mapping, Optional, Sequence, Union

from ._channel import ChannelRunner
from ._poll import PollRunner
from ._runner import Handler, OnError, Runner, print_error
from ._ws import UpgradeRefused

_TASK_TYPE_CHARS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-")


def default_worker_id() -> str:
    host = "".join(c if c in _TASK_TYPE_CHARS else "-" for c in socket.gethostname())[:64]
    return f"{host}-{os.getpid()}-{random.getrandbits(24):06x}"


class Worker:
    """A worker of the cluster at ``url`` (or the nodes of a list, tried in turn on reconnect).

    - ``handlers``: task type → ``handler(ctx)``. A handler returns the task's result (any JSON,
      or None), raises ``PermanentError`` to fail for good, or raises anything else to fail and be
      retried (with backoff, while ``max_retries`` lasts).
    - ``concurrency``: tasks run at once, each in a thread of the worker's pool. @default 10
    - ``token``: an API key with the ``work`` scope.
    - ``transport``: ``"channel"`` (with the HTTP fallback) or ``"http"``. @default channel
    - ``stop_timeout``: seconds a graceful stop waits for running handlers (None: no limit). @default 30
    - ``linger``: seconds results wait to share a frame or request. @default 0.003
    - ``max_batch``: most results in one frame or request (≤ 1000). @default 1000
    - ``poll_wait``: seconds a long-poll waits on the node (≤ 30). @default 20
    - ``on_error(error, context)``: told of errors the worker recovers from. @default print to stderr
    """

    def __init__(
        self,
        url: Union[str, Sequence[str]],
        handlers: Mapping[str, Handler],
        *,
        token: Optional[str] = None,
        concurrency: int = 10,
        worker_id: Optional[str] = None,
        transport: str = "channel",
        stop_timeout: Optional[float] = 30.0,
        linger: float = 0.003,
        max_batch: int = 1000,
        poll_wait: float = 20.0,
        on_error: Optional[OnError] = None,
    ) -> None:
        urls = [url] if isinstance(url, str) else list(url)
        if not urls or not all(isinstance(u, str) and u.startswith(("http://", "https://")) for u in urls):
            raise ValueError("Worker: url must be an http(s) URL, or a list of them")
        if not handlers:
            raise ValueError("Worker: handlers must name at least one task type")
        for task_type, handler in handlers.items():
            if not task_type or len(task_type) > 128 or not set(task_type) <= _TASK_TYPE_CHARS:
                raise ValueError(f"Worker: {task_type!r} is not a task type")
            if not callable(handler):
                raise ValueError(f"Worker: the handler of {task_type} is not callable")
        if transport not in ("channel", "http"):
            raise ValueError('Worker: transport must be "channel" or "http"')
        if not isinstance(concurrency, int) or not 1 <= concurrency <= 100_000:
            raise ValueError("Worker: concurrency must be an integer between 1 and 100000")
        if not isinstance(max_batch, int) or not 1 <= max_batch <= 1000:
            raise ValueError("Worker: max_batch must be an integer between 1 and 1000")
        if not 0 <= poll_wait <= 30:
            raise ValueError("Worker: poll_wait must be between 0 and 30 seconds")
        self.urls = [u.rstrip("/") for u in urls]
        self.handlers = dict(handlers)
        self.token = token
        self.concurrency = concurrency
        self.worker_id = worker_id or default_worker_id()
        if len(self.worker_id) > 128:
            raise ValueError("Worker: worker_id must be 1–128 characters")
        self.stop_timeout = stop_timeout
        self.linger = linger
        self.max_batch = max_batch
        self.poll_wait = poll_wait
        self.on_error: OnError = on_error or print_error
        self._requested_transport = transport
        self._runner: Optional[Runner] = None
        self._lock = threading.Lock()
        self._stop_requested = threading.Event()
        self._stopped = threading.Event()
        self._stopping = False

    @property
    def transport(self) -> Optional[str]:
        """The transport in use: ``"channel"``, ``"http"`` (asked for, or the fallback), None before ``start``."""
        runner = self._runner
        if runner is None:
            return None
        return "channel" if isinstance(runner, ChannelRunner) else "http"

    @property
    def stats(self) -> Dict[str, int]:
        """Counters: succeeded, failed, reported, discarded, leases_lost, reconnects, polls, result_frames,
        not_run, handed_back, and running now."""
        runner = self._runner
        if runner is None:
            return {}
        with runner.lock:
            out = dict(runner.stats)
            out["running"] = len(runner.running)
        return out

    def start(self) -> None:
        """Starts taking tasks in background threads; returns at once."""
        with self._lock:
            if self._runner is not None:
                return
            if self._requested_transport == "http":
                self._runner = self._http_runner()
            else:
                self._runner = ChannelRunner(
                    self.urls,
                    self.handlers,
                    worker_id=self.worker_id,
                    token=self.token,
                    concurrency=self.concurrency,
                    linger=self.linger,
                    max_batch=self.max_batch,
                    on_error=self.on_error,
                    on_fallback=self._fall_back,
                )
            runner = self._runner
        runner.start()  # type: ignore[attr-defined]

    def _http_runner(self) -> PollRunner:
        return PollRunner(
            self.urls[0],
            self.handlers,
            worker_id=self.worker_id,
            token=self.token,
            concurrency=self.concurrency,
            linger=self.linger,
            max_batch=self.max_batch,
            poll_wait=self.poll_wait,
            on_error=self.on_error,
        )

    def _fall_back(self, error: UpgradeRefused) -> None:
        self.on_error(error, "the node has no worker channel: this worker falls back to HTTP long-poll")
        with self._lock:
            if self._stopping:
                return
            old = self._runner
            runner = self._http_runner()
            self._runner = runner
        if old is not None:
            old.pool.shutdown()
        runner.start()

    def stop(self, timeout: Optional[Any] = ...) -> None:
        """Stops gracefully (see the class); ``timeout`` overrides ``stop_timeout``. Blocks until stopped."""
        grace = self.stop_timeout if timeout is ... else timeout
        with self._lock:
            if self._stopping:
                already = True
            else:
                already = False
                self._stopping = True
            runner = self._runner
        if already:
            self._stopped.wait()
            return
        try:
            if runner is not None:
                runner.stop(grace)  # type: ignore[attr-defined]
        finally:
            self._stopped.set()
            self._stop_requested.set()

    def request_stop(self) -> None:
        """Asks ``run()`` to stop (what SIGTERM does); returns at once."""
        self._stop_requested.set()

    def run(self, install_signal_handlers: bool = True) -> Dict[str, int]:
        """Starts, blocks until SIGTERM/SIGINT or ``request_stop()``/``stop()``, stops gracefully, and
        returns the stats. Signal handlers are installed only from the main thread."""
        previous: Dict[int, Any] = {}
        if install_signal_handlers and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda *_: self._stop_requested.set())
        try:
            self.start()
            while not self._stop_requested.wait(0.2):
                pass
            self.stop()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return self.stats
