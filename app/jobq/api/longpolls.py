"""The long-poll cap: how many claims may wait at once in this process.

A waiting claim holds its client's connection, one file descriptor, for up to 30 s; a fleet
of workers holds thousands. Past the process's descriptor limit nothing works at all: no
connection is accepted and none opened to the database, so enqueues and acks fail with the
long-polls (jobq.descriptors). The claim route asks ``admit`` before it waits: a claim past
the cap does not wait; it answers 503 ``too_many_long_polls`` with ``Connection: close``,
which gives its descriptor back, after claiming once what it could unless claims already
waiting would take the same jobs (``watched``).

One counter per app, touched only on its event loop: no lock needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager

from starlette.requests import Request

# A refused long-poll is told to come back after between 1 and this many times
# JOBQ_RETRY_AFTER_S, at random: a fleet refused at once (a restart, a burst of workers) must
# not come back at once, every connection and its claim in the same second.
RETRY_SPREAD = 5

# What a waiting claim takes: a queue, and the job types it names (None: every type).
_Key = tuple[str, frozenset[str] | None]


def _keys(queues: Sequence[str], types: Sequence[str] | None) -> list[_Key]:
    kinds = None if types is None else frozenset(types)
    return [(queue, kinds) for queue in dict.fromkeys(queues)]


class LongPolls:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.waiting = 0
        self._watched: dict[_Key, int] = {}

    @contextmanager
    def admit(self, wait_ms: int, queues: Sequence[str],
              types: Sequence[str] | None) -> Iterator[bool]:
        """Whether a claim asking to wait ``wait_ms`` may wait: always for one that does not
        ask to; for a long-poll, while fewer than ``cap`` wait. Its place is held until the
        block ends."""
        if wait_ms <= 0:
            yield True
            return
        if self.waiting >= self.cap:
            yield False
            return
        keys = _keys(queues, types)
        self.waiting += 1
        for key in keys:
            self._watched[key] = self._watched.get(key, 0) + 1
        try:
            yield True
        finally:
            self.waiting -= 1
            for key in keys:
                left = self._watched[key] - 1
                if left:
                    self._watched[key] = left
                else:
                    del self._watched[key]

    def watched(self, queues: Sequence[str], types: Sequence[str] | None) -> bool:
        """Whether claims waiting now would take any job a claim of ``queues`` and ``types``
        could: each of its queues has a waiting claim of every type, or of the same types.
        A refused claim that is watched need not look itself (its jobs are not starved, they
        go to those waiting): the common case of a fleet on one queue, refused with no
        database work, so that the refusal gives its descriptor back at once."""
        kinds = None if types is None else frozenset(types)
        return all((queue, None) in self._watched
                   or (kinds is not None and (queue, kinds) in self._watched)
                   for queue in queues)

    @staticmethod
    def retry_after(base_s: int) -> int:
        """The Retry-After of a refused long-poll, spread over ``base_s`` to ``RETRY_SPREAD``
        times it."""
        return random.randint(base_s, base_s * RETRY_SPREAD)


async def _await_disconnect(request: Request, hung_up: asyncio.Event) -> None:
    # Once the body is read, the ASGI receive() returns only when the client disconnects
    # (http.disconnect); any other message is more body, which a read body has none of.
    while (await request.receive())["type"] != "http.disconnect":
        pass
    hung_up.set()


@asynccontextmanager
async def hangup_watch(request: Request, wait_ms: int) -> AsyncIterator[asyncio.Event | None]:
    """An event set the moment the client of a long-poll disconnects, so that its wait ends
    then (core.wakeups): a worker that aborts its long-poll on stop, or dies, must neither
    hold a place under the cap until ``wait_ms`` runs out nor keep a stopping service
    waiting for it. None for a claim that does not wait. Call it once the body is read."""
    if wait_ms <= 0:
        yield None
        return
    hung_up = asyncio.Event()
    watcher = asyncio.ensure_future(_await_disconnect(request, hung_up))
    try:
        yield hung_up
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
