"""A small thread pool for synchronous handlers, with daemon threads.

``concurrent.futures.ThreadPoolExecutor`` joins its threads when the interpreter exits, so
one handler stuck in a blocking call would keep a stopped worker alive forever. A worker
must be able to exit once its grace period is over (the service gets those jobs back), so
these threads are daemons and the pool never waits for them.

Outcomes go back to the loop in batches: a thread adds its outcome to a shared list and wakes
the loop only when the list was empty (``call_soon_threadsafe`` writes to the loop's wake-up
pipe, a system call per job otherwise); the loop hands all of them to ``on_done`` in one
callback. No future and no task per call: the worker's own bookkeeping is the callback.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

# (token, context to run in, function, its argument): what a thread picks up.
_Item = tuple[Any, contextvars.Context, Callable[[Any], Any], Any]
# (token, returned normally, the value returned or the exception raised).
_Outcome = tuple[Any, bool, Any]

log = logging.getLogger("jobq.worker")


class HandlerThreadError(RuntimeError):
    """A handler raised a BaseException (SystemExit, KeyboardInterrupt) in its thread; it
    must not take the event loop down with it, so it travels wrapped (see ``__cause__``)."""


class DaemonThreadPool:
    """Calls functions in up to ``size`` daemon threads; ``on_done(token, ok, value)`` gets
    each outcome on the loop of the first ``submit`` (one loop per pool)."""

    def __init__(
        self, size: int, on_done: Callable[[Any, bool, Any], None], name: str = "jobq-handler"
    ) -> None:
        self._size = size
        self._name = name
        self._on_done = on_done
        self._items: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        # Calls handed over and not yet settled on the loop; read and written on the loop
        # only, so no lock: a thread is started when they outnumber the threads.
        self._outstanding = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done: deque[_Outcome] = deque()
        self._wake_sent = False  # a _settle_all is scheduled and has not started yet
        self._closed = False  # shut down: outcomes are dropped

    def submit(
        self, fn: Callable[[Any], Any], arg: Any, token: Any, context: contextvars.Context
    ) -> None:
        """Call ``fn(arg)`` in ``context`` (a fresh copy per call: a context runs in one
        thread at a time) in a pool thread; ``on_done(token, ...)`` follows on the loop.

        Nothing stops a thread once started: the caller drops outcomes it no longer wants.
        """
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        self._items.put((token, context, fn, arg))
        self._outstanding += 1
        if self._outstanding > len(self._threads) and len(self._threads) < self._size:
            thread = threading.Thread(
                target=self._serve, name=f"{self._name}-{len(self._threads)}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def shutdown(self) -> None:
        """Let idle threads end; busy ones end after their current call (or with the process),
        and what they return is dropped: the worker is gone."""
        self._closed = True
        for _ in self._threads:
            self._items.put(None)

    def _serve(self) -> None:
        loop = self._loop
        assert loop is not None
        while (item := self._items.get()) is not None:
            token, context, fn, arg = item
            try:
                outcome: _Outcome = (token, True, context.run(fn, arg))
            except Exception as exc:
                outcome = (token, False, exc)
            except BaseException as exc:
                wrapped = HandlerThreadError(f"handler raised {exc!r}")
                wrapped.__cause__ = exc
                outcome = (token, False, wrapped)
            self._done.append(outcome)
            if not self._wake_sent:
                self._wake_sent = True
                try:
                    loop.call_soon_threadsafe(self._settle_all)
                except RuntimeError:
                    pass  # the loop is closed: the worker has stopped and drops this outcome
            del item, token, outcome

    def _settle_all(self) -> None:
        # Cleared before the list is read: an outcome added from now on either is read
        # below or finds the flag down and schedules another pass.
        self._wake_sent = False
        done = self._done
        if self._closed:
            done.clear()
            return
        on_done = self._on_done
        while done:
            token, ok, value = done.popleft()
            self._outstanding -= 1
            try:
                on_done(token, ok, value)
            except Exception:  # a bug there must not lose the outcomes after this one
                log.exception("handling a handler's outcome failed")
