"""create_app: the one place that wires concrete pieces together."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable

from fastapi import FastAPI
from fastapi.routing import APIRoute

from jobq.api import problems
from jobq.api.hot import HotPaths, hot_routes
from jobq.api.limits import BodyLimit
from jobq.api.routes import dead, health, jobs, leases, metrics, queues
from jobq.core.context import Context
from jobq.core.duties import run_duties
from jobq.core.reaper import run_reaper
from jobq.core.wakeups import Wakeups
from jobq.settings import Settings
from jobq.store.db import Database
from jobq.store.leader import Leadership

log = logging.getLogger("jobq.api")

DESCRIPTION = """
A durable job queue over HTTP, on PostgreSQL. Producers enqueue with `POST /v1/jobs`;
workers claim with bounded leases from `/v1/leases`, heartbeat, ack or fail.

Every 2xx that says a job was accepted means it is committed. Every 4xx and 5xx is
`application/problem+json` (RFC 9457) with a `code`. Durations are integers in
milliseconds (`*_ms`), times RFC 3339 in UTC, ids opaque strings.

Where the contract is silent: queues named in one claim are tried in the order given
(Faktory's strict order); `completed_at` is set when a job reaches any final status
(`completed`, `dead`, `cancelled`); lease lengths are 100 ms to 1 day; priorities are
32-bit integers; an empty body is accepted wherever every field is optional.
"""


SHUTDOWN_STEP_S = 3.0


async def _bounded(step: Awaitable[object], what: str) -> None:
    try:
        async with asyncio.timeout(SHUTDOWN_STEP_S):
            await step
    except TimeoutError:
        log.warning("shutdown: gave up waiting for the %s", what)
    except Exception as exc:
        log.warning("shutdown: %s: %s", what, exc)


def _operation_id(route: APIRoute) -> str:
    # Pinned to the handler's name, so the committed OpenAPI document only changes when an
    # endpoint does.
    return route.name


def create_app(settings: Settings, database_url: str | None = None, *,
               hot_paths: bool = True) -> FastAPI:
    """The ASGI app. ``database_url`` (libpq form) overrides ``settings.database_url``, for
    callers that started an embedded server. ``hot_paths=False`` serves every request
    through FastAPI's routing (``jobq.api.hot``), for tests that compare the two. Raises
    ``HotRouteError`` for a route marked ``@hot`` that the hot paths cannot honour."""
    url = database_url or settings.libpq_url
    db = Database(url, pool_size=settings.pool_size, timeout_s=settings.db_timeout_s,
                  retry_after_s=settings.retry_after_s)
    ctx = Context(db=db, wakeups=Wakeups(db))

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await db.open(wait=False)
        await ctx.wakeups.start()
        leadership = Leadership(url)
        tasks = [
            asyncio.create_task(run_reaper(ctx, settings.reap_interval_s), name="jobq-reaper"),
            asyncio.create_task(run_duties(ctx, leadership), name="jobq-duties"),
        ]
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            # Each step is bounded: a shutdown must never hang on a database that went away.
            await _bounded(asyncio.gather(*tasks, return_exceptions=True), "background tasks")
            await _bounded(leadership.release(), "leader lock")
            await _bounded(ctx.wakeups.stop(), "LISTEN connection")
            await _bounded(db.close(), "connection pool")

    app = FastAPI(
        title="jobq",
        version="1",
        description=DESCRIPTION,
        lifespan=lifespan,
        generate_unique_id_function=_operation_id,
    )
    app.state.ctx = ctx
    app.state.settings = settings
    problems.install(app)
    for module in (jobs, leases, queues, dead, metrics, health):
        app.include_router(module.router)
    problems.install_document(app)
    # Built from the routes just included, and built either way, so that a route the hot
    # paths cannot honour fails here, not on its first request.
    hot = hot_routes(app.router.routes)
    if hot_paths:
        app.add_middleware(HotPaths, routes=hot)
    # Added last, so outermost: every request passes the limit, whichever way it is answered.
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    return app
