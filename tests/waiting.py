"""The one way tests wait for something they are not told of: poll a condition until it
holds, or fail saying what was awaited. Nothing here orders events by the clock: the order
comes from the condition, and the timeout is only how long a broken run may take to fail.

    eventually(lambda: job_status(c, 1) == "completed", what="job 1 completed")
    await aeventually(lambda: worker.idle, what="the worker to go idle")
    await aeventually(fetch_status, what=...)      # an async check is awaited each round
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 20.0
POLL_S = 0.01


def _why(what: str | Callable[[], str]) -> str:
    # A callable, so that logs are read when the wait fails, not before.
    return what() if callable(what) else what


def eventually(check: Callable[[], T], *, timeout_s: float = DEFAULT_TIMEOUT_S,
               what: str | Callable[[], str] = "the condition", poll_s: float = POLL_S) -> T:
    """Call ``check`` until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout_s} s: {_why(what)} (last: {value!r})")
        time.sleep(poll_s)


async def aeventually(check: Callable[[], T | Awaitable[T]], *, timeout_s: float = DEFAULT_TIMEOUT_S,
                      what: str | Callable[[], str] = "the condition", poll_s: float = POLL_S) -> T:
    """As ``eventually``, in a running event loop; ``check`` may be sync or async."""
    deadline = time.monotonic() + timeout_s
    while True:
        value: Any = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout_s} s: {_why(what)} (last: {value!r})")
        await asyncio.sleep(poll_s)
