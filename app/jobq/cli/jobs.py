"""``jobq enqueue``, ``job``, ``jobs``, ``cancel`` and ``retry``: one job at a time, and the
listing that pages through the service's keyset pages (also ``jobq dead``'s)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from jobq.cli.help_format import CommandGroup
from jobq.cli.output import AsJson, Wide, fail, print_json, print_table, show, table_width
from jobq.cli.remote import DEFAULT_URL, Token, Url, check_job_id, connect, json_object
from jobq.cli.views import job_details, jobs_table
from jobq.client import Client, Job, JobStatus

app = CommandGroup()

MAX_PAGE = 1000  # the service's largest page (GET /v1/jobs?limit=)
Limit = Annotated[int, typer.Option(min=1, help="how many jobs to show, newest first (pages as needed)")]
Every = Annotated[bool, typer.Option("--all", help="every matching job, page after page")]
Cursor = Annotated[str | None, typer.Option(help="start after this point (printed when more remain)")]
JobId = Annotated[str, typer.Argument(help="the job's id, as `jobq jobs` lists it")]


def show_job(job: Any, as_json: bool) -> None:
    if as_json:
        print_json(job)
    else:
        width = table_width(wide=False)
        print_table(jobs_table([job], width), width)


def list_jobs(c: Client, *, queue: str | None, status: str | None, type_: str | None,
              limit: int, every: bool, cursor: str | None) -> tuple[list[Job], str | None]:
    """Follow the service's keyset pages until ``limit`` jobs (or all, with ``every``); the
    cursor returned continues after the last job shown (None: there is nothing more)."""
    found: list[Job] = []
    while True:
        want = MAX_PAGE if every else min(MAX_PAGE, limit - len(found))
        page = c.list_jobs(queue=queue, status=status, type=type_, limit=want, cursor=cursor)
        found.extend(page.jobs)
        cursor = page.next_cursor
        if cursor is None or (not every and len(found) >= limit):
            return found, cursor


def print_jobs(found: list[Job], cursor: str | None, as_json: bool, wide: bool = False) -> None:
    if as_json:
        print_json({"jobs": found, "next_cursor": cursor})
        return
    width = table_width(wide)
    print_table(jobs_table(found, width), width)
    if cursor is not None:
        # On stderr: the table on stdout stays only the table.
        typer.echo(f"({len(found)} shown; more with --limit, --all or --cursor {cursor})", err=True)


@app.command()
def enqueue(
    ctx: typer.Context,
    type: Annotated[str, typer.Argument(help="the job type")],  # noqa: A002
    payload: Annotated[str, typer.Option(help="JSON object")] = "{}",
    queue: Annotated[str | None, typer.Option()] = None,
    priority: Annotated[int | None, typer.Option()] = None,
    delay_ms: Annotated[int | None, typer.Option(min=0)] = None,
    max_attempts: Annotated[int | None, typer.Option(min=1)] = None,
    idempotency_key: Annotated[str | None, typer.Option()] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Enqueue one job."""
    body = json_object(ctx, payload)
    with connect(ctx) as c:
        job = c.enqueue(type, body, queue=queue, priority=priority,
                        delay=None if delay_ms is None else delay_ms / 1000,
                        max_attempts=max_attempts, idempotency_key=idempotency_key)
    show_job(job, as_json)


@app.command()
def job(ctx: typer.Context, job_id: JobId,
        url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False) -> None:
    """Show one job: payload, result, worker, times and every failed attempt."""
    with connect(ctx) as c:
        found = c.get(check_job_id(ctx, job_id))
    if as_json:
        print_json(found)
        return
    show(job_details(found))


@app.command()
def jobs(
    ctx: typer.Context,
    queue: Annotated[str | None, typer.Option()] = None,
    status: Annotated[str | None, typer.Option(help=f"one of {', '.join(JobStatus)}")] = None,
    type: Annotated[str | None, typer.Option()] = None,  # noqa: A002
    limit: Limit = 100,
    every: Every = False,
    cursor: Cursor = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
    wide: Wide = False,
) -> None:
    """List jobs, newest first: id, queue, type, status, attempt and age."""
    if status is not None and status not in set(JobStatus):
        fail(f"--status {status!r} is not a status: one of {', '.join(JobStatus)}", code=2, as_json=as_json)
    with connect(ctx) as c:
        found, more = list_jobs(c, queue=queue, status=status, type_=type, limit=limit,
                                every=every, cursor=cursor)
    print_jobs(found, more, as_json, wide)


@app.command()
def cancel(ctx: typer.Context, job_id: JobId,
           url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False) -> None:
    """Cancel a waiting or running job."""
    with connect(ctx) as c:
        show_job(c.cancel(check_job_id(ctx, job_id)), as_json)


@app.command()
def retry(ctx: typer.Context, job_id: JobId,
          url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False) -> None:
    """Retry a dead, cancelled or failed job now."""
    with connect(ctx) as c:
        show_job(c.retry(check_job_id(ctx, job_id)), as_json)
