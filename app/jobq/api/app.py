"""create_app: the one place that wires concrete pieces together."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.routing import APIRoute

from jobq import descriptors
from jobq.api import document, problems
from jobq.api.access import Authenticate, check_rules, document_access, guarded
from jobq.api.deps import known_query
from jobq.api.direct import check_direct
from jobq.api.hot import JobqApp
from jobq.api.limits import BodyLimit
from jobq.api.longpolls import LongPolls
from jobq.api.routes import (
    activity,
    dead,
    health,
    jobs,
    leases,
    metrics,
    problem_pages,
    queues,
    schedules,
    tokens,
    topics,
    ui,
)
from jobq.api.serving import on_stop
from jobq.core import metrics as core_metrics
from jobq.core.context import Context
from jobq.core.duties import run_duties
from jobq.core.reaper import run_reaper
from jobq.core.schedules import run_scheduler
from jobq.core.tokens import TokenTable
from jobq.core.wakeups import Wakeups
from jobq.settings import Settings
from jobq.store.db import Database
from jobq.store.leader import Leadership

log = logging.getLogger("jobq.api")

DESCRIPTION = """
A durable job queue over HTTP, on PostgreSQL. Producers enqueue with `POST /v1/jobs`;
workers claim with bounded leases from `/v1/leases`, heartbeat, ack or fail, or release
(give a job back without spending its attempt: a worker that stops).

How it behaves (the job's life, leases and fencing, retries, limits, access, every error
`code`, the guarantees), with a curl example per operation: the guide `openapi/GUIDE.md`,
beside this document in the repository (installed with the package as
`jobq/openapi/GUIDE.md`).

Every 2xx that says a job was accepted means it is committed. Every 4xx and 5xx is
`application/problem+json` (RFC 9457) with a `code`. Its `type` is `/problems/{code}`, a
URI reference relative to the request's URL: this service answers it, without a token, with
a page on what the code means and what to do (JSON with `Accept: application/json`).
Durations are integers in
milliseconds (`*_ms`), times RFC 3339 in UTC, ids opaque strings.

Where the contract is silent: queues named in one claim are tried in the order given
(Faktory's strict order); `completed_at` is set when a job reaches any final status
(`completed`, `dead`, `cancelled`); lease lengths are 100 ms to 1 day; priorities are
32-bit integers; an empty body is accepted wherever every field is optional.

Beyond the contract: `POST /v1/leases/{lease_id}/release` (and `POST /v1/leases/release`
for many) gives a held job back to `pending`, claimable after its `delay_ms` (default 0),
without counting the claim against `max_attempts` (`attempt` goes back down by one) or
recording an error or a lease expiry; each job's `releases` lists its released claims.

Request bodies are read strictly, as the contract asks: unknown fields and values of the
wrong JSON type are refused, without coercion (`"1"` is not a number, `0` and `"yes"` are
not booleans, `1.0` is not an integer), each with a 422 whose `errors[].loc` names the
field. Times sent are RFC 3339 strings with an offset, within years 1 to 9999 once in UTC
(`9999-12-31T23:59:59-14:00` is refused); `delay_ms` (an enqueue's or a release's) and
`retry_in_ms` are at most 10 years, so no delay can reach past that either. Query parameters are text by nature and are
parsed (`?limit=5`); one a route does not take is a 422 too, so that a misspelt filter
cannot widen a listing or a purge. A body over the size limit (default 1 MiB) is a 413 that names it.

Below the routes: a request that is not HTTP/1.1 the service can parse is a `400` with code
`bad_request`; a connection that has not sent its whole request line and headers within
`JOBQ_HEADER_TIMEOUT_S` (default 10 s) of opening, or of its request's first byte, is closed,
with a `408` `request_timeout` when part of a request came. Both close the connection.

When the service stops (SIGTERM, Ctrl-C), a long-poll waiting for work is answered at once
with the ordinary empty claim answer, `200 {"leases": []}`, and `Connection: close`: ask
again (another replica, or this one once restarted, answers). A claim already in its
statement finishes, so a job it leased is in its answer.

## Authentication

Once any access token exists, every call but `/healthz`, `/readyz` and the error pages
`/problems/{code}` needs the header
`Authorization: Bearer <token>`. Tokens are made with `jobq tokens create --role
producer|worker|admin [--queues PATTERN]` or `POST /v1/tokens`; each operation below says
which roles may call it; this document and `/docs` need a token too. While no token was ever
created and `JOBQ_ADMIN_TOKEN` is unset (local mode) the service listens on loopback only
and needs no header; revoking every token does not bring local mode back.

- `401 unauthorized`: no token, a token that is unknown or revoked, or a header that is not
  `Bearer <token>`. The answer carries `WWW-Authenticate: Bearer realm="jobq"`, with
  `error="invalid_token"` when a token was sent. Sending the same token again cannot help.
- `403 forbidden`: a valid token whose role may not make the call, or a queue named in the
  request outside the token's queue pattern (comma-separated shell-style globs such as
  `tenant-a.*`). A job or lease of a queue outside the pattern answers `404`, as if absent.
- `503 unavailable` with `Retry-After`: the service has not read the tokens from the
  database yet (just started, database away).

A revoked token stops working on every replica within a second, and a claim never hands out a
job under a token whose revocation committed before it: each claim checks its token in the
database as it takes jobs, and answers `401` if it was revoked, on whichever replica.
"""


SHUTDOWN_STEP_S = 3.0
FIRST_TOKENS_READ_S = 2.0


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


def _document_access(app: FastAPI) -> None:
    """The served (and committed) OpenAPI document states who may call what."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document.complete_document(
                document_access(build(), app.router.routes))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def create_app(settings: Settings, database_url: str | None = None) -> FastAPI:
    """The ASGI app. ``database_url`` (libpq form) overrides ``settings.database_url``, for
    callers that started an embedded server."""
    url = database_url or settings.libpq_url
    prepare = None if settings.prepared_statements == "auto" else settings.prepared_statements == "on"
    db = Database(url, pool_size=settings.pool_size, timeout_s=settings.db_timeout_s,
                  retry_after_s=settings.retry_after_s, direct_url=settings.direct_url(url),
                  pool_min_size=settings.pool_min_size, idle_s=settings.pool_idle_s,
                  pooling=settings.database_pooling, prepare=prepare)
    ctx = Context(db=db, wakeups=Wakeups(db), history_partition_s=settings.history_partition_s)
    token_table = TokenTable(db, settings.admin_token)
    token_table.on_revoked(ctx.wakeups.revoked)  # long-polls of a revoked token end at once
    long_polls = LongPolls(settings.long_poll_cap(descriptors.current().usable))

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # Before any connection is opened: each process (of --workers N too) raises its own
        # limit, and sizes its long-poll cap from what it got.
        limit = descriptors.raise_soft_limit()
        long_polls.cap = settings.long_poll_cap(limit.usable)
        how = "JOBQ_MAX_LONG_POLLS" if settings.max_long_polls is not None else (
            f"derived: ({limit.usable} - pool {settings.pool_size} - "
            f"{descriptors.RESERVED_FOR_SESSIONS} - {descriptors.RESERVED_FOR_PROCESS}) // 2")
        log.info("%s; long-polls capped at %d (%s)", limit.describe(), long_polls.cap, how)
        if settings.max_long_polls is not None and \
                long_polls.cap >= descriptors.room(limit.usable, settings.pool_size):
            # The operator's number, past what the limit holds: say so now, not at the
            # first enqueue that finds no descriptor.
            log.warning("JOBQ_MAX_LONG_POLLS=%d leaves no room in the descriptor limit of %d: "
                        "long-polls may use up the descriptors enqueues and acks need",
                        long_polls.cap, limit.usable)
        log.info("database connections: %s", settings.connection_budget())
        await db.open(wait=False)
        log.info("database pooling: %s (prepared statements %s)%s", db.pooling,
                 "on" if db.prepare else "off",
                 "; LISTEN, the duties' lock and upkeep use JOBQ_DIRECT_DATABASE_URL"
                 if db.direct_url != db.url else "")
        await ctx.wakeups.start()
        # Long-polls are released when the stop signal arrives, not here at the end: the
        # server runs this shutdown only once every request was answered (jobq.api.serving).
        forget_stop = on_stop(ctx.wakeups.drain)
        # Read the tokens once before serving, so that the first requests are not answered
        # 503 while they load; a database that is away is not waited for (the task retries).
        with contextlib.suppress(Exception):
            async with asyncio.timeout(FIRST_TOKENS_READ_S):
                await token_table.refresh()
        leadership = Leadership(db.direct_url)
        tasks = [
            asyncio.create_task(token_table.run(), name="jobq-tokens"),
            asyncio.create_task(run_reaper(ctx, settings.reap_interval_s), name="jobq-reaper"),
            asyncio.create_task(run_duties(ctx, leadership), name="jobq-duties"),
            # Every replica runs one; row locks make each fire happen once (core/schedules.py).
            asyncio.create_task(run_scheduler(ctx), name="jobq-scheduler"),
        ]
        try:
            yield
        finally:
            forget_stop()
            ctx.wakeups.drain()  # served some other way (tests, another server): at least now
            for task in tasks:
                task.cancel()
            # Each step is bounded: a shutdown must never hang on a database that went away.
            await _bounded(asyncio.gather(*tasks, return_exceptions=True), "background tasks")
            await _bounded(leadership.release(), "leader lock")
            await _bounded(ctx.wakeups.stop(), "LISTEN connection")
            await _bounded(db.close(), "connection pool")

    app = JobqApp(
        title="jobq",
        version="1",
        description=DESCRIPTION,
        lifespan=lifespan,
        generate_unique_id_function=_operation_id,
    )
    app.state.ctx = ctx
    app.state.settings = settings
    # The counters by queue take the gauges' bound (JOBQ_METRICS_QUEUES, …): /metrics stays
    # bounded however many queues this process sees.
    core_metrics.bound_counters(metrics.bound_of(settings))
    app.state.tokens = token_table
    app.state.long_polls = long_polls
    problems.install(app)
    for module in (jobs, leases, queues, dead, schedules, topics, metrics, tokens, activity):
        app.include_router(module.router, dependencies=[Depends(guarded)])
    app.include_router(health.router, dependencies=[Depends(known_query)])
    app.include_router(problem_pages.router, dependencies=[Depends(known_query)])
    # The dashboard's files: public, as they hold no data (it reads /v1 with a token).
    app.include_router(ui.router, dependencies=[Depends(known_query)])
    public_paths = check_rules(app.router.routes)
    check_direct(app.router.routes)
    document.install_document(app)
    _document_access(app)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    # Added last, so outermost: every request is authenticated before anything else, its
    # body limit included.
    app.add_middleware(Authenticate, tokens=token_table, public_paths=public_paths,
                       retry_after_s=settings.retry_after_s)
    return app
