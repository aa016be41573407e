"""``jobq worker``: run handlers from an importable module against a running service."""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from jobq.cli.help_format import CommandGroup
from jobq.cli.output import fail
from jobq.cli.remote import DEFAULT_URL, Token, Url, url_source
from jobq.client._base import check_url

app = CommandGroup()


@app.command()
def worker(
    ctx: typer.Context,
    spec: Annotated[str, typer.Argument(
        help="dotted.module:attribute (myapp.jobs:handlers, not a file path) naming a dict "
             "that maps each job type to its handler")],
    queues: Annotated[str | None, typer.Option(
        envvar="JOBQ_QUEUES",
        help="comma-separated, tried in this order; without it, the queue default")] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=1000)] = 10,
    lease_ms: Annotated[int | None, typer.Option(min=100)] = None,
    grace_period: Annotated[float, typer.Option(
        min=0, help="seconds running jobs get to finish on SIGTERM/SIGINT; the rest are released "
                    "(pending again, the attempt not counted)")] = 25.0,  # the SDK's DEFAULT_GRACE_PERIOD_S
    worker_id: Annotated[str | None, typer.Option()] = None,
    prefetch: Annotated[int, typer.Option(
        min=0, max=1000, help="jobs claimed ahead of free slots (held, heartbeated)")] = 0,
    log_level: Annotated[str, typer.Option(
        envvar="JOBQ_LOG_LEVEL", help="DEBUG adds a line per HTTP request")] = "INFO",
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Run handlers from an importable module until SIGTERM/SIGINT."""
    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        fail(f"--log-level {log_level!r}: use DEBUG, INFO, WARNING or ERROR", code=2)
    from jobq.worker import run_worker

    source = url_source(ctx)
    try:
        # Before the handlers are imported: a URL typo is said first, naming what chose it.
        check_url(url)
    except ValueError as exc:
        fail(f"{exc} (from {source})", code=2)
    try:
        code = run_worker(url, spec, queues, concurrency, token=token, lease_ms=lease_ms,
                          worker_id=worker_id, grace_period=grace_period, prefetch=prefetch,
                          url_source=source, log_level=level)
    except ValueError as exc:
        # A handler's errors fail its job inside the worker; a ValueError that gets here
        # is the command line's (a spec that does not import, no queue): a line, not a trace.
        fail(str(exc), code=2)
    raise typer.Exit(code)
