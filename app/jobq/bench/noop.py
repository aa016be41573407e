"""The handlers ``jobq bench --sdk`` gives its ``jobq worker`` processes and its in-process
``Worker``: one job type, a plain function that does nothing, so what is measured is the
worker runner and the SDK around it. A plain function rather than ``async def`` because that
is what the README's first handler is: it runs in the worker's thread pool, as most will.

    jobq worker jobq.bench.noop:handlers --queues some-queue
"""

from __future__ import annotations

from typing import Any

from jobq.bench.config import JOB_TYPE


def noop(job: Any) -> None:
    return None


handlers = {JOB_TYPE: noop}
