"""The service's commands: ``jobq serve`` (migrate, then serve the API), ``migrate``,
``bench`` and ``openapi``; and the checks ``serve`` makes before it binds anything."""

from __future__ import annotations

import ipaddress
import math
import os
import shutil
import signal
import tempfile
from contextlib import ExitStack
from typing import Annotated

import typer

from jobq.cli.help_format import CommandGroup
from jobq.cli.server_setup import (
    database,
    load_settings,
    migrate_database,
    need_server,
    pooling_of,
    reach,
    setup_logging,
)

app = CommandGroup()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_refusal(host: str, *, secured: bool, insecure: bool) -> str | None:
    """Why ``jobq serve`` must not bind ``host``, or None when it may. Without any token
    (none in the database, no JOBQ_ADMIN_TOKEN) anyone who reaches the port may do
    anything, so only loopback is allowed, unless the operator says --insecure."""
    if secured or insecure or is_loopback(host):
        return None
    return (f"refusing to bind {host} with no access tokens (local mode is loopback only); "
            "create one with `jobq tokens create --role admin`, set JOBQ_ADMIN_TOKEN, "
            "or pass --insecure")


def port_refusal(host: str, port: int) -> str | None:
    """Why ``jobq serve`` cannot listen on ``host:port``, or None when it can. Tried by
    binding (and closing) a socket as uvicorn will, before the database is started: a busy
    port is one line that says what to do, not uvicorn's ``[Errno 98]`` log and exit 3. A
    port taken between this check and uvicorn's bind still gets uvicorn's message."""
    import errno
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # As uvicorn binds: a port whose last connections are in TIME_WAIT is free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OverflowError:  # not a port number at all
            return f"port {port} is not a TCP port (0 to 65535); choose another with --port N or JOBQ_PORT"
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return (f"port {port} on {host} is already in use (another jobq serve?); "
                        "choose another with --port N or JOBQ_PORT")
            reason = exc.strerror or str(exc)
            return f"cannot listen on {host}:{port}: {reason}; choose another with --host/--port"
    return None


def has_tokens(url: str) -> bool:
    """Whether the database ends local mode (a token, even a revoked one: revoking every
    token locks the service, it does not open it), with the statement the service reads it
    with."""
    import psycopg

    from jobq.store.queries import Q
    from jobq.store.sessions import CONNECT_TIMEOUT_S

    with psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S, prepare_threshold=None,
                         application_name="jobq-start") as conn:
        row = conn.execute(Q.TokensEver).fetchone()
    return bool(row and row[0])


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="address to bind (default JOBQ_HOST)")] = None,
    port: Annotated[int | None, typer.Option(help="port (default JOBQ_PORT, 8000)")] = None,
    workers: Annotated[int, typer.Option(min=1, help="uvicorn worker processes")] = 1,
    insecure: Annotated[bool, typer.Option(help="bind a public address with no tokens")] = False,
) -> None:
    """Apply pending migrations, then serve the API."""
    need_server("serve")
    import uvicorn

    from jobq.api.serving import PROTOCOL

    settings = load_settings()
    setup_logging(settings)
    bind_host = host or settings.host
    bind_port = port if port is not None else settings.port
    busy = port_refusal(bind_host, bind_port)
    if busy:
        typer.echo(f"jobq: {busy}", err=True)
        raise typer.Exit(1)

    with ExitStack() as stack:
        url = database(stack, settings, create=True)  # only serve makes the embedded one
        direct_url = settings.direct_url(url)
        # Before any statement runs through a pooler: what it is, and whether what needs a
        # session has one (or one line and exit 2).
        pooling = pooling_of(settings, url, direct_url) if settings.database_url else "session"
        migrate_database(direct_url)
        # Tokens created with `jobq tokens create` count as much as JOBQ_ADMIN_TOKEN; they are
        # read after migrating (the table may be new) and before binding anything.
        secured = bool(settings.admin_token) or reach(direct_url, lambda: has_tokens(direct_url))
        refusal = bind_refusal(bind_host, secured=secured, insecure=insecure)
        if refusal:
            typer.echo(f"jobq: {refusal}", err=True)
            raise typer.Exit(2)
        if not secured:
            if is_loopback(bind_host):
                typer.echo(f"jobq: local mode (no access tokens): serving on {bind_host} only, "
                           "anyone who can reach it may do anything; `jobq tokens create` "
                           "ends it", err=True)
            else:
                typer.echo(f"jobq: INSECURE: serving {bind_host} with no access tokens; anyone "
                           "who can reach it may do anything", err=True)
        # uvicorn re-raises SIGTERM once it has shut down, with the handler that was there
        # before it started: make that one a no-op so our ExitStack (the embedded server's
        # stop) still runs, and the process exits 0.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: None)
        # For uvicorn's worker processes: the embedded server's URL, and the pooling probed.
        os.environ["JOBQ_DATABASE_URL"] = url
        os.environ["JOBQ_DATABASE_POOLING"] = pooling
        if workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            # One scrape reaches one worker process: prometheus-client's multiprocess mode
            # makes each count what all of them did (each writes its counts to a file in this
            # folder; a scrape sums them). Fresh per run, so counters start at 0 like a
            # single process's do.
            metrics_dir = tempfile.mkdtemp(prefix="jobq-metrics-")
            stack.callback(shutil.rmtree, metrics_dir, ignore_errors=True)
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
        uvicorn.run(
            "jobq.api.main:app",
            factory=True,
            host=bind_host,
            port=bind_port,
            workers=workers,
            loop="auto",
            http=PROTOCOL,  # uvicorn's, one socket write per response
            log_level=settings.log_level.lower(),
            access_log=False,
            # Idle long-polls are answered when the stop signal arrives (jobq.api.serving);
            # what is left is requests in their statements, each bounded by db_timeout_s: let
            # them finish, so that a lease granted reaches its worker.
            timeout_graceful_shutdown=math.ceil(settings.db_timeout_s) + 1,
            lifespan="on",
        )


@app.command("migrate")
def migrate_cmd() -> None:
    """Apply pending migrations and exit."""
    need_server("migrate")
    settings = load_settings()
    setup_logging(settings)
    with ExitStack() as stack:
        url = database(stack, settings)
        direct_url = settings.direct_url(url)
        # As `jobq serve` does: migrations hold a session's advisory lock, which a transaction
        # pooler would strand on one of its server sessions (one line and exit 2 instead).
        if settings.database_url:
            pooling_of(settings, url, direct_url)
        migrate_database(direct_url)
    typer.echo("jobq: schema is up to date")


@app.command()
def bench(
    url: Annotated[str | None, typer.Option(
        help="a running service (loopback only); default: start `jobq serve` on a free port")] = None,
    database_url: Annotated[str | None, typer.Option(
        help="the service's database, for --baseline and its CPU figure (default JOBQ_DATABASE_URL; "
             "when the bench starts the service and neither is set: the embedded PostgreSQL)")] = None,
    mode: Annotated[str, typer.Option(help="single, batch or both")] = "both",
    jobs: Annotated[int, typer.Option(min=1, help="jobs per phase")] = 20_000,
    producers: Annotated[int, typer.Option(min=1, help="producer tasks")] = 4,
    workers: Annotated[int, typer.Option(min=1, help="worker tasks")] = 8,
    batch: Annotated[int, typer.Option(min=1, max=1000, help="jobs per batch call (batch mode)")] = 100,
    queue: Annotated[str | None, typer.Option(
        help="base of the queue names (default: a fresh one per run)")] = None,
    latency_rate: Annotated[float, typer.Option(min=1, help="offered jobs/s for pickup latency")] = 200.0,
    latency_seconds: Annotated[float, typer.Option(min=0, help="how long to offer it (0: skip)")] = 5.0,
    baseline: Annotated[bool, typer.Option(help="also measure the raw-SQL ceiling")] = False,
    connections: Annotated[str, typer.Option(
        help="raw-SQL connection counts to try, the best kept (comma-separated, 1 to 16)")] = "1,2,4",
    server_workers: Annotated[int, typer.Option(min=1, help="uvicorn processes of a started service")] = 1,
    timeout: Annotated[float, typer.Option(min=1, help="seconds each phase may take")] = 300.0,
    token: Annotated[str | None, typer.Option(
        envvar="JOBQ_TOKEN", help="access token (default JOBQ_ADMIN_TOKEN)")] = None,
    sdk: Annotated[bool, typer.Option(
        help="also drive the service through the SDK (Client, AsyncClient, `jobq worker`, Worker) "
             "beside the raw client, each figure as a ratio to it; needs the database")] = False,
    sdk_workers: Annotated[int, typer.Option(min=1, max=16, help="`jobq worker` processes for --sdk")] = 2,
    sdk_concurrency: Annotated[int, typer.Option(
        min=1, max=1000, help="each --sdk worker's --concurrency (and the raw tasks' claim limit)")] = 10,
    waiters: Annotated[int, typer.Option(
        min=0, max=100_000, help="also hold this many idle long-polls (wait_ms 20000) from another process: "
                                 "the service's CPU and database transactions/s while idle, and pickup "
                                 "beside them against pickup without (0: skip)")] = 0,
    waiters_idle_seconds: Annotated[float, typer.Option(
        min=1, help="how long the idle cost of --waiters is read (one whole wait: each long-poll's "
                    "timeout and re-post counted once)")] = 20.0,
    queues: Annotated[int, typer.Option(
        min=0, max=1_000_000, help="also make this many queues in the database (at least 101; a few "
                                   "with a job waiting) and measure claims naming 1 and 100 queues, "
                                   "GET /v1/queues's first page and /metrics beside them; deleted "
                                   "afterwards (0: skip)")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON for scripts")] = False,
    drivers: Annotated[bool, typer.Option(
        help="only compare psycopg's paths (async, pool, pipeline, sync, sync in threads) on the "
             "database, then exit")] = False,
) -> None:
    """Measure enqueue, drain and end-to-end rates, pickup latency and CPU per job over HTTP."""
    need_server("bench")
    from jobq import bench as b
    from jobq.bench.drivers import main as drivers_main

    if drivers:
        settings = load_settings()
        raise typer.Exit(drivers_main(
            database_url or (settings.libpq_url if settings.database_url else None), as_json=as_json))

    try:
        bench_mode = b.Mode(mode)
    except ValueError:
        raise typer.BadParameter("single, batch or both", param_hint="--mode") from None
    try:
        counts = tuple(sorted({int(c) for c in connections.split(",") if c.strip()}))
    except ValueError:
        raise typer.BadParameter("comma-separated integers", param_hint="--connections") from None
    if not counts or not all(1 <= c <= 16 for c in counts):
        raise typer.BadParameter("between 1 and 16", param_hint="--connections")
    if 0 < queues < 101:
        raise typer.BadParameter("0, or at least 101 (a claim names 100 queues)", param_hint="--queues")
    settings = load_settings()
    cfg = b.BenchConfig(
        url=url, database_url=database_url or (settings.libpq_url if settings.database_url else None),
        data_dir=settings.data_dir, mode=bench_mode, jobs=jobs, producers=producers, workers=workers,
        batch=batch, queue=queue, latency_rate=latency_rate, latency_seconds=latency_seconds,
        baseline=baseline, server_workers=server_workers, connections=counts, timeout_s=timeout,
        token=token or settings.admin_token, sdk=sdk, sdk_workers=sdk_workers, sdk_concurrency=sdk_concurrency,
        waiters=waiters, waiters_idle_seconds=waiters_idle_seconds, queues=queues,
    )
    raise typer.Exit(b.main(cfg, as_json=as_json))


@app.command()
def openapi(
    write: Annotated[bool, typer.Option(help="write openapi/openapi.json instead of printing")] = False,
) -> None:
    """Print (or write) the OpenAPI document the service serves at /openapi.json."""
    need_server("openapi")
    from jobq.api import openapi as doc

    text = doc.render()
    if write:
        doc.DOCUMENT.parent.mkdir(exist_ok=True)
        doc.DOCUMENT.write_text(text)
        typer.echo(f"wrote {doc.DOCUMENT}")
    else:
        typer.echo(text, nl=False)
