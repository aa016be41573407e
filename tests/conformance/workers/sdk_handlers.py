"""The conformance kit's three job types as handlers for the Python SDK's worker.

Run from this folder (``jobq worker`` imports modules, not files, from the current one):

    jobq conformance --url http://127.0.0.1:8000 -- jobq worker sdk_handlers:handlers --grace-period 5

``jobq worker`` takes the URL, the token and the queue from JOBQ_URL, JOBQ_TOKEN and
JOBQ_QUEUES, which the kit sets. The heartbeats, long-polls, Retry-After and the release on
SIGTERM are the worker's; these handlers only do the work. ``--grace-period 5``: the kit's
stop check runs a two-minute job and wants the worker gone within 30 s, and the default grace
period is 30 s of waiting for it before the release.
"""

from __future__ import annotations

import asyncio
from typing import Any

from jobq import Discard, Job


def echo(job: Job) -> Any:
    return job.payload


def fail(job: Job) -> None:
    # A failure no retry can fix: the job goes dead at once, the message as its error.
    raise Discard(job.payload["message"])


async def sleep(job: Job) -> dict[str, int]:
    # async: a stop past the grace period cancels it, where a thread would run on.
    await asyncio.sleep(job.payload["ms"] / 1000)
    return {"slept": job.payload["ms"]}


handlers = {"conformance.echo": echo, "conformance.fail": fail, "conformance.sleep": sleep}
