"""A client of one node's HTTP API (docs/api.md). Answers are the API's JSON as dicts, with the
API's own (snake_case) member names; errors are ``wheelhouse.errors`` exceptions carrying the
API's error ``code``.

    from wheelhouse import Client
    client = Client("http://127.0.0.1:7070", token="...")
    task = client.submit("email.send", {"to": "a@example.com"}, max_retries=5)
    client.wait_for(task["task_id"], "succeeded")
"""

from __future__ import annotations

import time
import urllib.parse
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from ._http import Transport
from .errors import WaitTimeout

JsonDict = Dict[str, Any]

#: Statuses after which a task changes no more.
FINISHED = ("succeeded", "failed", "cancelled", "expired")


def _quote(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


def task_body(
    task_type: str,
    payload: Any = None,
    *,
    schedule: Optional[Mapping[str, Any]] = None,
    dependencies: Optional[Sequence[str]] = None,
    idempotency_key: Optional[str] = None,
    priority: Optional[int] = None,
    max_retries: Optional[int] = None,
    timeout_seconds: Optional[float] = None,
    max_timeout_seconds: Optional[float] = None,
    start_deadline_seconds: Optional[float] = None,
    limits: Optional[Sequence[str]] = None,
    debounce: Optional[Mapping[str, Any]] = None,
    **extra: Any,
) -> JsonDict:
    """A submission's body (``POST /api/tasks``), members left out when not given so the node's defaults apply.
    ``extra`` passes members this SDK does not name yet."""
    body: JsonDict = {"task_type": task_type}
    if payload is not None:
        body["payload"] = payload
    for name, value in (
        ("schedule", schedule),
        ("dependencies", dependencies),
        ("idempotency_key", idempotency_key),
        ("priority", priority),
        ("max_retries", max_retries),
        ("timeout_seconds", timeout_seconds),
        ("max_timeout_seconds", max_timeout_seconds),
        ("start_deadline_seconds", start_deadline_seconds),
        ("limits", limits),
        ("debounce", debounce),
    ):
        if value is not None:
            body[name] = list(value) if name in ("dependencies", "limits") else value
    body.update(extra)
    return body


class Limits:
    """Flow control (``client.limits``, docs/api.md "Flow control"): declaring needs an ``admin`` key."""

    def __init__(self, http: Transport) -> None:
        self._http = http

    def put(
        self,
        name: str,
        *,
        concurrency: Optional[int] = None,
        rate: Optional[Mapping[str, Any]] = None,
        on_limit: Optional[str] = None,
        weight: Optional[float] = None,
    ) -> JsonDict:
        """``PUT /api/limits/{name}``: declares or changes a key or a family (``customer:*``); the whole
        declaration (what is left out goes back to its default). ``rate``: ``{"limit", "period_seconds", "burst"}``."""
        body: JsonDict = {}
        if concurrency is not None:
            body["concurrency"] = concurrency
        if rate is not None:
            body["rate"] = dict(rate)
        if on_limit is not None:
            body["on_limit"] = on_limit
        if weight is not None:
            body["weight"] = weight
        return self._http.send("PUT", f"/api/limits/{_quote(name)}", body, idempotent=True)[1]

    def get(self, name: str) -> JsonDict:
        """``GET /api/limits/{name}``: its values and live figures (``running``, ``waiting``)."""
        return self._http.send("GET", f"/api/limits/{_quote(name)}", idempotent=True)[1]

    def delete(self, name: str) -> None:
        """``DELETE /api/limits/{name}``; ``ConflictError`` (``limit_in_use``) while waiting tasks take part in it."""
        self._http.send("DELETE", f"/api/limits/{_quote(name)}")

    def list_page(
        self, prefix: Optional[str] = None, limit: Optional[int] = None, next_token: Optional[str] = None
    ) -> JsonDict:
        """One page of ``GET /api/limits``: ``{"limits": [...], "next_token": ...}``."""
        query = {"prefix": prefix, "limit": limit, "next_token": next_token}
        return self._http.send("GET", "/api/limits", query=query, idempotent=True)[1]

    def list(self, prefix: Optional[str] = None) -> Iterator[JsonDict]:
        """Every declared limit (whose name starts with ``prefix``), page after page."""
        token: Optional[str] = None
        while True:
            page = self.list_page(prefix=prefix, next_token=token)
            yield from page["limits"]
            token = page.get("next_token")
            if token is None:
                return

    def pause_task_type(self, task_type: str) -> JsonDict:
        return self._http.send("POST", f"/api/task-types/{_quote(task_type)}/pause", idempotent=True)[1]

    def resume_task_type(self, task_type: str) -> JsonDict:
        return self._http.send("POST", f"/api/task-types/{_quote(task_type)}/resume", idempotent=True)[1]


class Client:
    """A client of the node at ``url`` (``http://host:port``). ``token``: an API key, sent as
    ``Authorization: Bearer``. ``retries``: how often a request is retried (see ``_http``);
    ``timeout``: seconds per attempt. Thread-safe."""

    def __init__(self, url: str, token: Optional[str] = None, *, timeout: float = 30.0, retries: int = 3) -> None:
        self._http = Transport(url, token, timeout=timeout, retries=retries)
        self.url = self._http.url
        self.limits = Limits(self._http)

    def close(self) -> None:
        """Closes the kept-alive connections."""
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- tasks ----------------------------------------------------------------------------

    def submit(self, task_type: str, payload: Any = None, **options: Any) -> JsonDict:
        """``POST /api/tasks``: ``{"task_id", "status", "due_time", "created"}`` (``created`` is False for an
        idempotent replay). Options as ``task_body``. Retried after a network error only with an ``idempotency_key``."""
        body = task_body(task_type, payload, **options)
        status, answer = self._http.send("POST", "/api/tasks", body, idempotent="idempotency_key" in body)
        return {**answer, "created": status == 201}

    def submit_batch(self, tasks: Sequence[Mapping[str, Any]]) -> List[JsonDict]:
        """``POST /api/tasks/batch``: up to 1 000 submission bodies (``task_body(...)`` or dicts), all or nothing;
        answers ``{"task_id", "status", "due_time"}`` in request order."""
        items = [dict(t) for t in tasks]
        idempotent = len(items) > 0 and all("idempotency_key" in t for t in items)
        return self._http.send("POST", "/api/tasks/batch", {"tasks": items}, idempotent=idempotent)[1]["tasks"]

    batch = submit_batch

    def submit_dag(self, tasks: Sequence[Mapping[str, Any]], idempotency_key: Optional[str] = None) -> JsonDict:
        """``POST /api/dags``: a graph of tasks with ``ref`` and ``depends_on``, all or nothing."""
        body: JsonDict = {"tasks": [dict(t) for t in tasks]}
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        return self._http.send("POST", "/api/dags", body, idempotent=idempotency_key is not None)[1]

    def get(self, task_id: str) -> JsonDict:
        """``GET /api/tasks/{id}``; ``TaskNotFoundError`` for an unknown id."""
        return self._http.send("GET", f"/api/tasks/{_quote(task_id)}", idempotent=True)[1]

    def list_page(
        self,
        *,
        status: Optional[str] = None,
        task_type: Optional[str] = None,
        schedule_id: Optional[str] = None,
        limit: Optional[int] = None,
        next_token: Optional[str] = None,
    ) -> JsonDict:
        """One page of ``GET /api/tasks``, newest first: ``{"tasks": [...], "next_token": ...}``. A page shorter
        than ``limit`` is not the last; the last has ``next_token`` None."""
        query = {
            "status": status,
            "task_type": task_type,
            "schedule_id": schedule_id,
            "limit": limit,
            "next_token": next_token,
        }
        return self._http.send("GET", "/api/tasks", query=query, idempotent=True)[1]

    def list(
        self,
        *,
        status: Optional[str] = None,
        task_type: Optional[str] = None,
        schedule_id: Optional[str] = None,
        page_size: Optional[int] = None,
    ) -> Iterator[JsonDict]:
        """Every task that matches, newest first, page after page."""
        token: Optional[str] = None
        while True:
            page = self.list_page(
                status=status, task_type=task_type, schedule_id=schedule_id, limit=page_size, next_token=token
            )
            yield from page["tasks"]
            token = page.get("next_token")
            if token is None:
                return

    def cancel(self, task_id: str) -> JsonDict:
        """``DELETE /api/tasks/{id}``: ``{"ok", "cancelled_instances"}``. A running task's worker is told
        (its ``ctx.cancelled`` is set); ``ConflictError`` (``task_finished``) once it has ended."""
        return self._http.send("DELETE", f"/api/tasks/{_quote(task_id)}")[1]

    def retry(self, task_id: str) -> JsonDict:
        """``POST /api/tasks/{id}/retry``: a failed, cancelled or expired task runs again; answers the task."""
        return self._http.send("POST", f"/api/tasks/{_quote(task_id)}/retry")[1]

    def explain(self, task_id: str) -> JsonDict:
        """``GET /api/tasks/{id}/explain``: where the task is and what it waits for, with a ``sentence``."""
        return self._http.send("GET", f"/api/tasks/{_quote(task_id)}/explain", idempotent=True)[1]

    def pause(self, task_id: str) -> JsonDict:
        """``POST /api/tasks/{id}/pause`` (a cron schedule)."""
        return self._http.send("POST", f"/api/tasks/{_quote(task_id)}/pause")[1]

    def resume(self, task_id: str) -> JsonDict:
        """``POST /api/tasks/{id}/resume`` (a cron schedule)."""
        return self._http.send("POST", f"/api/tasks/{_quote(task_id)}/resume")[1]

    def history(self, task_id: str, limit: Optional[int] = None) -> Iterator[JsonDict]:
        """Every execution of the task, newest first (``GET /api/tasks/{id}/history``, page after page)."""
        token: Optional[str] = None
        while True:
            page = self._http.send(
                "GET",
                f"/api/tasks/{_quote(task_id)}/history",
                query={"limit": limit, "next_token": token},
                idempotent=True,
            )[1]
            yield from page["executions"]
            token = page.get("next_token")
            if token is None:
                return

    def wait_for(
        self,
        task_id: str,
        statuses: Union[str, Sequence[str]] = FINISHED,
        timeout: float = 60.0,
        poll_interval: float = 0.2,
    ) -> JsonDict:
        """Polls the task until its status is one of ``statuses``; ``WaitTimeout`` after ``timeout`` seconds."""
        wanted = (statuses,) if isinstance(statuses, str) else tuple(statuses)
        deadline = time.monotonic() + timeout
        interval = poll_interval
        last: Optional[str] = None
        while True:
            task = self.get(task_id)
            last = task.get("status")
            if last in wanted:
                return task
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(task_id, wanted, last, timeout)
            time.sleep(min(interval, left))
            interval = min(2.0, interval * 1.5)

    # -- operations on many tasks ---------------------------------------------------------

    def start_operation(self, action: str, filter: Mapping[str, Any]) -> JsonDict:
        """``POST /api/operations``: cancel, retry or delete every task ``filter`` matches, in the background."""
        return self._http.send("POST", "/api/operations", {"action": action, "filter": dict(filter)})[1]

    def get_operation(self, operation_id: str) -> JsonDict:
        return self._http.send("GET", f"/api/operations/{_quote(operation_id)}", idempotent=True)[1]
