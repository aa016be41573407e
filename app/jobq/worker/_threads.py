"""A small thread pool for synchronous handlers, with daemon threads.

``concurrent.futures.ThreadPoolExecutor`` joins its threads when the interpreter exits, so
one handler stuck in a blocking call would keep a stopped worker alive forever. A worker
must be able to exit once its grace period is over (the service gets those jobs back), so
these threads are daemons and the pool never waits for them.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any

_Item = tuple[
    asyncio.AbstractEventLoop, "asyncio.Future[Any]", contextvars.Context, Callable[[Any], Any], Any
]


class HandlerThreadError(RuntimeError):
    """A handler raised a BaseException (SystemExit, KeyboardInterrupt) in its thread; it
    must not take the event loop down with it, so it travels wrapped (see ``__cause__``)."""


class DaemonThreadPool:
    def __init__(self, size: int, name: str = "jobq-handler") -> None:
        self._size = size
        self._name = name
        self._items: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()

    def run(self, fn: Callable[[Any], Any], arg: Any) -> asyncio.Future[Any]:
        """Call ``fn(arg)`` in a pool thread; the future settles on the calling loop.

        Cancelling the future does not stop the thread: its outcome is simply dropped.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        # Like asyncio.to_thread: the handler sees the caller's contextvars.
        self._items.put((loop, future, contextvars.copy_context(), fn, arg))
        self._grow()
        return future

    def shutdown(self) -> None:
        """Let idle threads end; busy ones end after their current call (or with the process)."""
        for _ in self._threads:
            self._items.put(None)

    def _grow(self) -> None:
        if self._idle.acquire(blocking=False):
            return
        with self._lock:
            if len(self._threads) < self._size:
                thread = threading.Thread(
                    target=self._serve, name=f"{self._name}-{len(self._threads)}", daemon=True
                )
                thread.start()
                self._threads.append(thread)

    def _serve(self) -> None:
        while (item := self._items.get()) is not None:
            loop, future, context, fn, arg = item
            try:
                outcome: tuple[bool, Any] = (True, context.run(fn, arg))
            except Exception as exc:
                outcome = (False, exc)
            except BaseException as exc:
                wrapped = HandlerThreadError(f"handler raised {exc!r}")
                wrapped.__cause__ = exc
                outcome = (False, wrapped)
            try:
                loop.call_soon_threadsafe(_settle, future, outcome)
            except RuntimeError:
                pass  # the loop is closed: the worker has stopped and drops this outcome
            del item, future, outcome
            self._idle.release()


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.done():  # cancelled: the job was lost or handed back meanwhile
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
