"""A small thread pool for synchronous handlers, with daemon threads.

``concurrent.futures.ThreadPoolExecutor`` joins its threads when the interpreter exits, so
one handler stuck in a blocking call would keep a stopped worker alive forever. A worker
must be able to exit once its grace period is over (the service gets those jobs back), so
these threads are daemons and the pool never waits for them.

Outcomes go back to the loop in batches: a thread adds its outcome to a shared list and wakes
the loop only when the list was empty (``call_soon_threadsafe`` writes to the loop's wake-up
pipe, a system call per job otherwise); the loop settles all of them in one callback.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

_Item = tuple["asyncio.Future[Any]", contextvars.Context, Callable[[Any], Any], Any]
_Outcome = tuple["asyncio.Future[Any]", bool, Any]


class HandlerThreadError(RuntimeError):
    """A handler raised a BaseException (SystemExit, KeyboardInterrupt) in its thread; it
    must not take the event loop down with it, so it travels wrapped (see ``__cause__``)."""


class DaemonThreadPool:
    def __init__(self, size: int, name: str = "jobq-handler") -> None:
        self._size = size
        self._name = name
        self._items: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        # Calls handed over and not yet settled on the loop; read and written on the loop
        # only, so no lock: a thread is started when they outnumber the threads.
        self._outstanding = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done: deque[_Outcome] = deque()
        self._wake_sent = False  # a _settle_all is scheduled and has not started yet

    def run(self, fn: Callable[[Any], Any], arg: Any) -> asyncio.Future[Any]:
        """Call ``fn(arg)`` in a pool thread; the future settles on the calling loop (one
        loop per pool: the first caller's).

        Cancelling the future does not stop the thread: its outcome is simply dropped.
        """
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = self._loop.create_future()
        # Like asyncio.to_thread: the handler sees the caller's contextvars.
        self._items.put((future, contextvars.copy_context(), fn, arg))
        self._outstanding += 1
        if self._outstanding > len(self._threads) and len(self._threads) < self._size:
            thread = threading.Thread(
                target=self._serve, name=f"{self._name}-{len(self._threads)}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return future

    def shutdown(self) -> None:
        """Let idle threads end; busy ones end after their current call (or with the process)."""
        for _ in self._threads:
            self._items.put(None)

    def _serve(self) -> None:
        while (item := self._items.get()) is not None:
            future, context, fn, arg = item
            try:
                outcome: _Outcome = (future, True, context.run(fn, arg))
            except Exception as exc:
                outcome = (future, False, exc)
            except BaseException as exc:
                wrapped = HandlerThreadError(f"handler raised {exc!r}")
                wrapped.__cause__ = exc
                outcome = (future, False, wrapped)
            self._done.append(outcome)
            if not self._wake_sent:
                self._wake_sent = True
                try:
                    future.get_loop().call_soon_threadsafe(self._settle_all)
                except RuntimeError:
                    pass  # the loop is closed: the worker has stopped and drops this outcome
            del item, future, outcome

    def _settle_all(self) -> None:
        # Cleared before the list is read: an outcome added from now on either is read
        # below or finds the flag down and schedules another pass.
        self._wake_sent = False
        done = self._done
        while done:
            future, ok, value = done.popleft()
            self._outstanding -= 1
            if future.done():  # cancelled: the job was lost or handed back meanwhile
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
