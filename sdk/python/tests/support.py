"""What the tests against a node share. They run when ``WHEELHOUSE_URL`` names a node (the
vitest file test/e2e/python-sdk.test.ts starts one and runs them) and are skipped otherwise.

- ``WHEELHOUSE_URL``: the node, as workers reach it (through a proxy the harness can re-point).
- ``WHEELHOUSE_API_KEY``: an admin key (the node asks for keys).
- ``WHEELHOUSE_TEST_CONTROL``: the harness's control URL: ``POST /restart`` restarts the node.
"""

from __future__ import annotations

import os
import time
import unittest
import urllib.request
import uuid
from typing import Callable, Optional, TypeVar

from wheelhouse import Client

URL = os.environ.get("WHEELHOUSE_URL")
TOKEN = os.environ.get("WHEELHOUSE_API_KEY")
CONTROL = os.environ.get("WHEELHOUSE_TEST_CONTROL")

needs_node = unittest.skipUnless(URL, "WHEELHOUSE_URL names no node (run through test/e2e/python-sdk.test.ts)")
needs_control = unittest.skipUnless(URL and CONTROL, "WHEELHOUSE_TEST_CONTROL is not set")

T = TypeVar("T")


def client() -> Client:
    assert URL is not None
    return Client(URL, token=TOKEN)


def unique_type(name: str) -> str:
    return f"py.{name}.{uuid.uuid4().hex[:8]}"


def until(check: Callable[[], Optional[T]], what: str, timeout: float = 20.0) -> T:
    """Waits for ``check()`` to answer something other than None/False; fails naming ``what``."""
    end = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def control(action: str) -> None:
    """Asks the harness to act on the node (``restart``); returns once it has."""
    assert CONTROL is not None
    request = urllib.request.Request(f"{CONTROL}/{action}", data=b"{}", method="POST")
    with urllib.request.urlopen(request, timeout=120) as answer:
        answer.read()
