"""JSON over HTTP to one node, with the client's retry rules (as the TypeScript client's):

- 429 and 503 are retried whatever the method (the node wrote nothing), after ``Retry-After``
  or a bounded backoff;
- a network error (or a 5xx other than 503) is retried only when the call is safe to send
  twice (``idempotent``: GETs, PUTs, submissions with an idempotency key);
- any other 4xx is never retried;

at most ``retries`` times. Connections are kept alive, one per thread (``http.client``, which
``urllib.request`` is built on: ``urllib.request`` opens a connection per request, which a
worker reporting thousands of results a second cannot afford).
"""

from __future__ import annotations

import http.client
import json
import random
import select
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any, Dict, Mapping, Optional, Tuple

from .errors import ApiError, NetworkError, api_error

Query = Mapping[str, Any]


def backoff(attempt: int, base: float = 0.1, cap: float = 5.0) -> float:
    """Bounded exponential backoff with jitter, seconds."""
    return min(cap, base * (2 ** min(attempt, 16))) * (0.5 + random.random() / 2)


class Transport:
    """Requests to the node at ``url``; thread-safe (each thread has its own connection)."""

    def __init__(
        self,
        url: str,
        token: Optional[str] = None,
        timeout: float = 30.0,
        retries: int = 3,
        ssl_context: Optional[ssl.SSLContext] = None,
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be an absolute http(s) URL, got {url!r}")
        self.url = url.rstrip("/")
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self.retries = max(0, int(retries))
        self.ssl_context = ssl_context
        self.headers: Dict[str, str] = {"accept": "application/json"}
        if token:
            self.headers["authorization"] = f"Bearer {token}"
        self._local = threading.local()
        self._all: "set[http.client.HTTPConnection]" = set()
        self._lock = threading.Lock()

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        conn: Optional[http.client.HTTPConnection] = getattr(self._local, "conn", None)
        if conn is not None and conn.sock is not None and _closed_by_peer(conn.sock):
            # An idle kept-alive connection the node (or a proxy, or a node restart) closed: a
            # request sent on it would fail without being read, and one that is not safe to send
            # twice could not be retried. A new connection instead.
            self._drop()
            conn = None
        if conn is None:
            if self.tls:
                conn = http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.ssl_context)
            else:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
            self._local.conn = conn
            with self._lock:
                self._all.add(conn)
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            with self._lock:
                self._all.discard(conn)
        self._local.conn = None

    def abort_all(self) -> None:
        """Ends every connection at once (a long-poll in flight fails with a ``NetworkError``)."""
        with self._lock:
            conns = list(self._all)
        for conn in conns:
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        with self._lock:
            conns = list(self._all)
            self._all.clear()
        for conn in conns:
            conn.close()

    def once(
        self, method: str, path: str, body: Any = None, query: Optional[Query] = None, timeout: Optional[float] = None
    ) -> Tuple[int, Any, Optional[float]]:
        """One request: (status, parsed body, Retry-After seconds). Raises ``NetworkError`` when no answer came."""
        target = self.prefix + path
        if query:
            pairs = [(k, v if isinstance(v, str) else json.dumps(v)) for k, v in query.items() if v is not None]
            if pairs:
                target += "?" + urllib.parse.urlencode(pairs)
        headers = dict(self.headers)
        data: Optional[bytes] = None
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode("utf-8")
            headers["content-type"] = "application/json"
        conn = self._connection(self.timeout if timeout is None else timeout)
        try:
            conn.request(method, target, body=data, headers=headers)
            res = conn.getresponse()
            raw = res.read()
        except (OSError, http.client.HTTPException) as error:
            self._drop()
            raise NetworkError(method, path, str(error) or type(error).__name__, isinstance(error, socket.timeout))
        if res.getheader("connection", "").lower() == "close":
            self._drop()
        retry_after: Optional[float] = None
        header = res.getheader("retry-after")
        if header:
            try:
                retry_after = float(header)
            except ValueError:
                retry_after = None
        parsed: Any = None
        if raw:
            try:
                parsed = json.loads(raw)
            except ValueError:
                if 200 <= res.status < 300:
                    raise NetworkError(method, path, f"the answer is not JSON: {raw[:200]!r}")
                parsed = raw.decode("utf-8", "replace")
        return res.status, parsed, retry_after

    def send(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: Optional[Query] = None,
        idempotent: bool = False,
        timeout: Optional[float] = None,
    ) -> Tuple[int, Any]:
        """A 2xx answer as (status, body); raises ``ApiError`` or ``NetworkError`` once the retries are spent."""
        attempt = 0
        while True:
            attempt += 1
            delay: Optional[float] = None
            error: Exception
            try:
                status, parsed, retry_after = self.once(method, path, body, query, timeout)
                if 200 <= status < 300:
                    return status, parsed
                error = api_error(status, parsed, retry_after, method, path)
                delay = retry_after
                retryable = status in (429, 503) or (status >= 500 and idempotent)
            except NetworkError as caught:
                error = caught
                retryable = idempotent
            if not retryable or attempt > self.retries:
                raise error
            time.sleep(delay if delay is not None else backoff(attempt - 1))


def _closed_by_peer(sock: socket.socket) -> bool:
    """An idle connection is readable only when the peer closed it (or sent what nobody asked for)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def headers_of(token: Optional[str]) -> Dict[str, str]:
    """The headers that carry ``token`` (the worker channel's upgrade sends the same as HTTP)."""
    return {"Authorization": f"Bearer {token}"} if token else {}


__all__ = ["Transport", "backoff", "headers_of", "ApiError"]
