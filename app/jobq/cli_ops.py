"""Terminal commands for producers, workers and operators, over the HTTP API (the SDK):
``jobq worker``, ``enqueue``, ``job``, ``jobs``, ``cancel``, ``retry``, ``dead``, ``queues``,
``schedules``.

Tables for people (rich), ``--json`` for scripts. ``--url`` (JOBQ_URL) and ``--token``
(JOBQ_TOKEN) say which service to talk to.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, NoReturn

import typer

# The click that typer runs on: typer 0.2x carries its own copy, older ones use click itself.
# ClickException, NoArgsIsHelpError and UsageError are re-exported for jobq.cli's main().
try:
    from typer._click.core import ParameterSource
    from typer._click.exceptions import ClickException as ClickException
    from typer._click.exceptions import NoArgsIsHelpError as NoArgsIsHelpError
    from typer._click.exceptions import UsageError as UsageError
    from typer._click.globals import get_current_context
except ImportError:  # pragma: no cover - depends on typer's version
    from click import ClickException as ClickException  # type: ignore[assignment]
    from click import UsageError as UsageError  # type: ignore[assignment]
    from click import get_current_context  # type: ignore[assignment]
    from click.core import ParameterSource  # type: ignore[assignment]
    from click.exceptions import (  # type: ignore[attr-defined,no-redef]
        NoArgsIsHelpError as NoArgsIsHelpError,
    )
from rich.console import Console

from jobq.cli_format import (
    job_details,
    jobs_table,
    queue_details,
    queues_table,
    schedule_details,
    schedules_table,
)
from jobq.client import (
    APIError,
    Client,
    Forbidden,
    Job,
    JobqError,
    JobStatus,
    TransportError,
    Unauthorized,
    ValidationError,
)
from jobq.client._base import check_url

Url = Annotated[str, typer.Option(envvar="JOBQ_URL", help="the service's base URL")]
Token = Annotated[str | None, typer.Option(envvar="JOBQ_TOKEN", help="access token")]
AsJson = Annotated[bool, typer.Option("--json", help="print JSON for scripts")]
DEFAULT_URL = "http://127.0.0.1:8000"

console = Console()


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        extra = out.pop("extra", None) or {}
        return {**out, **extra}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, Enum):
        return value.value
    return value


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(_plain(value), indent=2, default=str) + "\n")


def _wants_json() -> bool:
    """Whether the command running was given ``--json`` (its errors are JSON then too)."""
    ctx = get_current_context(silent=True)
    return bool(ctx is not None and ctx.params.get("as_json"))


def _fail(message: str, code: int = 1, fields: dict[str, Any] | None = None) -> NoReturn:
    """One line on stderr, then exit ``code``: ``jobq: message``, or with ``--json`` a JSON
    object (``{"error": message, ...fields}``) so that a script never parses prose."""
    if _wants_json():
        sys.stderr.write(json.dumps({"error": message, **(fields or {})}, default=str) + "\n")
    else:
        # Plain, unwrapped: rich would wrap it at 80 columns when stderr is not a terminal.
        typer.secho(f"jobq: {message}", fg="red", err=True)
    raise typer.Exit(code)


def _job_id(job_id: str) -> str:
    """Job ids are the decimal numbers ``jobq jobs`` lists; anything else is a typo, said
    here rather than as the service's "does not exist"."""
    if not (job_id.isascii() and job_id.isdigit()):
        _fail(f"{job_id!r} is not a job id: ids are numbers, as `jobq jobs` lists them", code=2)
    return job_id


def _url_source(param: str = "url") -> str:
    """What chose the service URL: the option, the environment or the default."""
    ctx = get_current_context(silent=True)
    source = ctx.get_parameter_source(param) if ctx is not None else None
    if source is ParameterSource.COMMANDLINE:
        return "--url"
    if source is ParameterSource.ENVIRONMENT:
        return "JOBQ_URL"
    return "the default; set JOBQ_URL or pass --url"


def _refuse_group_options(ctx: typer.Context) -> None:
    """Refuse the options a group such as ``jobq dead`` takes for its own listing when they
    come before a subcommand: ``jobq dead --url X --limit 5 purge`` would otherwise purge
    every dead job on the default service. Only what the command line gave counts: JOBQ_URL
    and JOBQ_TOKEN from the environment are the subcommand's too. One line, exit 2, nothing
    done (the subcommand has not even been parsed yet)."""
    if ctx.invoked_subcommand is None:
        return
    given = [p for p in ctx.command.params
             if p.name and ctx.get_parameter_source(p.name) is ParameterSource.COMMANDLINE]
    if not given:
        return
    group, sub = ctx.info_name, ctx.invoked_subcommand
    # ctx.command is the group (a click Group, whatever copy of click typer carries).
    command = ctx.command.get_command(ctx, sub)  # type: ignore[attr-defined]
    takes = {o for p in (command.params if command is not None else []) for o in p.opts}

    def usage(params: list[Any]) -> str:
        return " ".join(p.opts[0] if getattr(p, "is_flag", False) else f"{p.opts[0]} ..."
                        for p in params)

    stray = [p for p in given if p.opts[0] not in takes]
    if stray:
        # --all or --cursor: only the listing has them; moving them would not help.
        names = ", ".join(p.opts[0] for p in stray)
        what = "they are" if len(stray) > 1 else "it is"
        _fail(f"jobq {group} {sub} takes no {names}: {what} for the listing alone "
              f"(jobq {group} {usage(stray)})", code=2)
    names = ", ".join(p.opts[0] for p in given)
    _fail(f"{names} must go after the subcommand: jobq {group} {sub} {usage(given)}", code=2)


_JSON_KIND = {list: "an array", str: "a string", int: "a number", float: "a number",
              bool: "a boolean", type(None): "null"}


def _json_object(payload: str) -> dict[str, Any]:
    """``--payload`` as the JSON object the contract wants; anything else is one line."""
    try:
        body = json.loads(payload)
    except ValueError as exc:
        _fail(f"--payload is not JSON: {exc}", code=2)
    if not isinstance(body, dict):
        _fail(f"payload must be a JSON object, not {_JSON_KIND.get(type(body), 'that')} "
              f"({payload.strip()[:40]})", code=2)
    return body


def _problem(exc: APIError) -> dict[str, Any]:
    return {"status": exc.status, "code": exc.code, "problem": exc.body or None}


@contextmanager
def _client(url: str, token: str | None) -> Iterator[Client]:
    try:
        client = Client(url, token=token, url_source=_url_source())
    except ValueError as exc:
        _fail(f"{exc} (from {_url_source()})", code=2)
    try:
        with client:
            yield client
    except TransportError as exc:
        # No HTTP answer at all: the message names the URL and what chose it.
        cause = exc.__cause__
        _fail(str(exc), fields={"url": url, "url_source": _url_source(),
                                "reason": type(cause).__name__ if cause else None})
    except Unauthorized as exc:
        # Say where the token comes from: the usual cause is none given, or an old one.
        given = token if token is not None else os.environ.get("JOBQ_TOKEN")
        hint = "check JOBQ_TOKEN or --token" if given else "set JOBQ_TOKEN or pass --token"
        _fail(f"{exc} ({hint})", fields=_problem(exc))
    except ValidationError as exc:
        # Each field the service refused, with why, in the option's spelling: one line. Exit
        # 1 as for any answer of the service (2 is for what the command line itself refuses).
        _fail(f"refused: {_invalid(exc)}", fields=_problem(exc))
    except Forbidden as exc:
        _fail(f"{exc} (this token's role or queues do not allow it)", fields=_problem(exc))
    except APIError as exc:
        _fail(str(exc), fields=_problem(exc))
    except JobqError as exc:
        _fail(str(exc))


def _invalid(exc: ValidationError) -> str:
    """``--lease-ms: Input should be less than or equal to 86400000; ...`` from a 422's
    ``errors`` (a body field is named as the option that sets it)."""
    parts = []
    for err in exc.errors:
        loc = [str(p) for p in err.get("loc") or [] if p not in ("body", "query", "path")]
        where = "--" + loc[0].replace("_", "-") if len(loc) == 1 else ".".join(loc)
        msg = str(err.get("msg") or "invalid").removeprefix("Value error, ")
        parts.append(f"{where}: {msg}" if where else msg)
    return "; ".join(parts) or str(exc)


def _show_job(job: Any, as_json: bool) -> None:
    if as_json:
        _print_json(job)
    else:
        console.print(jobs_table([job], console.width))


def _list_jobs(c: Client, *, queue: str | None, status: str | None, type_: str | None,
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


def _print_jobs(found: list[Job], cursor: str | None, as_json: bool) -> None:
    if as_json:
        _print_json({"jobs": found, "next_cursor": cursor})
        return
    console.print(jobs_table(found, console.width))
    if cursor is not None:
        # On stderr: the table on stdout stays only the table.
        typer.echo(f"({len(found)} shown; more with --limit, --all or --cursor {cursor})", err=True)


MAX_PAGE = 1000  # the service's largest page (GET /v1/jobs?limit=)
Limit = Annotated[int, typer.Option(min=1, help="how many jobs to show, newest first (pages as needed)")]
Every = Annotated[bool, typer.Option("--all", help="every matching job, page after page")]
Cursor = Annotated[str | None, typer.Option(help="start after this point (printed when more remain)")]


def register(app: typer.Typer) -> None:
    @app.command()
    def worker(
        spec: Annotated[str, typer.Argument(
            help="module:attribute naming a dict that maps each job type to its handler")],
        queues: Annotated[str, typer.Option(help="comma-separated, tried in this order")] = "default",
        concurrency: Annotated[int, typer.Option(min=1, max=1000)] = 10,
        lease_ms: Annotated[int | None, typer.Option(min=100)] = None,
        grace_period: Annotated[float, typer.Option(min=0)] = 30.0,
        worker_id: Annotated[str | None, typer.Option()] = None,
        prefetch: Annotated[int, typer.Option(
            min=0, max=1000, help="jobs claimed ahead of free slots (held, heartbeated)")] = 0,
        log_level: Annotated[str, typer.Option(
            envvar="JOBQ_LOG_LEVEL", help="DEBUG adds a line per HTTP request")] = "INFO",
        url: Url = DEFAULT_URL,
        token: Token = None,
    ) -> None:
        """Run handlers from an importable module until SIGTERM/SIGINT."""
        import logging

        level = logging.getLevelName(log_level.upper())
        if not isinstance(level, int):
            _fail(f"--log-level {log_level!r}: use DEBUG, INFO, WARNING or ERROR", code=2)
        from jobq.worker import run_worker

        try:
            check_url(url)
        except ValueError as exc:
            _fail(f"{exc} (from {_url_source()})", code=2)
        try:
            code = run_worker(url, spec, queues, concurrency, token=token, lease_ms=lease_ms,
                              worker_id=worker_id, grace_period=grace_period, prefetch=prefetch,
                              url_source=_url_source(), log_level=level)
        except ValueError as exc:
            # A handler's errors fail its job inside the worker; a ValueError that gets here
            # is the command line's (a spec that does not import, no queue): a line, not a trace.
            _fail(str(exc), code=2)
        raise typer.Exit(code)

    @app.command()
    def enqueue(
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
        body = _json_object(payload)
        with _client(url, token) as c:
            job = c.enqueue(type, body, queue=queue, priority=priority,
                            delay=None if delay_ms is None else delay_ms / 1000,
                            max_attempts=max_attempts, idempotency_key=idempotency_key)
        _show_job(job, as_json)

    @app.command()
    def job(job_id: str, url: Url = DEFAULT_URL, token: Token = None,
            as_json: AsJson = False) -> None:
        """Show one job: payload, result, worker, times and every failed attempt."""
        with _client(url, token) as c:
            found = c.get(_job_id(job_id))
        if as_json:
            _print_json(found)
            return
        console.print(job_details(found))

    @app.command()
    def jobs(
        queue: Annotated[str | None, typer.Option()] = None,
        status: Annotated[str | None, typer.Option(help=f"one of {', '.join(JobStatus)}")] = None,
        type: Annotated[str | None, typer.Option()] = None,  # noqa: A002
        limit: Limit = 100,
        every: Every = False,
        cursor: Cursor = None,
        url: Url = DEFAULT_URL,
        token: Token = None,
        as_json: AsJson = False,
    ) -> None:
        """List jobs, newest first: id, queue, type, status, attempt and age."""
        if status is not None and status not in set(JobStatus):
            _fail(f"--status {status!r} is not a status: one of {', '.join(JobStatus)}", code=2)
        with _client(url, token) as c:
            found, more = _list_jobs(c, queue=queue, status=status, type_=type, limit=limit,
                                     every=every, cursor=cursor)
        _print_jobs(found, more, as_json)

    @app.command()
    def cancel(job_id: str, url: Url = DEFAULT_URL, token: Token = None,
               as_json: AsJson = False) -> None:
        """Cancel a waiting or running job."""
        with _client(url, token) as c:
            _show_job(c.cancel(_job_id(job_id)), as_json)

    @app.command()
    def retry(job_id: str, url: Url = DEFAULT_URL, token: Token = None,
              as_json: AsJson = False) -> None:
        """Retry a dead, cancelled or failed job now."""
        with _client(url, token) as c:
            _show_job(c.retry(_job_id(job_id)), as_json)

    dead_app = typer.Typer(help="The dead-letter queue: list (the default), replay, purge.",
                           invoke_without_command=True)
    app.add_typer(dead_app, name="dead")

    @dead_app.callback()
    def dead_default(ctx: typer.Context,
                     queue: Annotated[str | None, typer.Option()] = None,
                     type: Annotated[str | None, typer.Option()] = None,  # noqa: A002
                     limit: Limit = 100, every: Every = False, cursor: Cursor = None,
                     url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False) -> None:
        """The dead-letter queue; alone, lists dead jobs (the same as `jobq dead list`)."""
        _refuse_group_options(ctx)
        if ctx.invoked_subcommand is None:
            dead_list(queue, type, limit, every, cursor, url, token, as_json)

    @dead_app.command("list")
    def dead_list(queue: Annotated[str | None, typer.Option()] = None,
                  type: Annotated[str | None, typer.Option()] = None,  # noqa: A002
                  limit: Limit = 100, every: Every = False, cursor: Cursor = None,
                  url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False) -> None:
        """List dead jobs, newest first."""
        with _client(url, token) as c:
            found, more = _list_jobs(c, queue=queue, status="dead", type_=type, limit=limit,
                                     every=every, cursor=cursor)
        _print_jobs(found, more, as_json)

    @dead_app.command("replay")
    def dead_replay(queue: Annotated[str | None, typer.Option()] = None,
                    type: Annotated[str | None, typer.Option()] = None,  # noqa: A002
                    limit: Annotated[int | None, typer.Option(min=1)] = None,
                    url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False) -> None:
        """Send matching dead jobs back to pending."""
        with _client(url, token) as c:
            n = c.replay_dead(queue=queue, type=type, limit=limit)
        _print_json({"replayed": n}) if as_json else console.print(f"replayed {n}")

    @dead_app.command("purge")
    def dead_purge(queue: Annotated[str | None, typer.Option()] = None,
                   type: Annotated[str | None, typer.Option()] = None,  # noqa: A002
                   limit: Annotated[int | None, typer.Option(min=1)] = None,
                   yes: Annotated[bool, typer.Option(
                       "--yes", help="no question asked when no --queue or --type is given")] = False,
                   url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False) -> None:
        """Delete matching dead jobs; with no --queue or --type, every dead job (asks first)."""
        if queue is None and type is None and not yes:
            what = f"the {limit} oldest dead jobs" if limit else "every dead job"
            if not sys.stdin.isatty():
                _fail(f"no --queue or --type: this would delete {what} in every queue; pass "
                      "--yes to confirm (there is no terminal to ask)", code=2)
            if not typer.confirm(f"Delete {what} in every queue?", default=False, err=True):
                _fail("nothing purged", code=1)
        with _client(url, token) as c:
            n = c.purge_dead(queue=queue, type=type, limit=limit)
        _print_json({"purged": n}) if as_json else console.print(f"purged {n}")

    queues_app = typer.Typer(help="Queues: counts, lag and settings.", invoke_without_command=True)
    app.add_typer(queues_app, name="queues")

    @queues_app.callback()
    def queues_list(ctx: typer.Context, url: Url = DEFAULT_URL, token: Token = None,
                    as_json: AsJson = False) -> None:
        """List queues with their counts and lag."""
        _refuse_group_options(ctx)
        if ctx.invoked_subcommand is not None:
            return
        with _client(url, token) as c:
            found = c.queues()
        if as_json:
            _print_json({"queues": found})
            return
        console.print(queues_table(found, console.width))

    @queues_app.command("set")
    def queues_set(
        name: Annotated[str, typer.Argument(help="the queue (created if it does not exist)")],
        max_depth: Annotated[int | None, typer.Option(
            min=0, help="waiting jobs allowed; more are refused with queue_full")] = None,
        paused: Annotated[bool | None, typer.Option(
            "--paused/--resumed", help="stop or restart handing out its jobs")] = None,
        lease_ms: Annotated[int | None, typer.Option(min=100, help="lease length given to workers")] = None,
        max_attempts: Annotated[int | None, typer.Option(min=1, help="attempts before a job is dead")] = None,
        backoff_base_ms: Annotated[int | None, typer.Option(min=0, help="first retry delay")] = None,
        backoff_max_ms: Annotated[int | None, typer.Option(min=0, help="longest retry delay")] = None,
        max_lease_expiries: Annotated[int | None, typer.Option(
            min=1, help="expired leases before a job is dead (a poison pill)")] = None,
        aging_ms: Annotated[int | None, typer.Option(
            min=1, help="waiting this long raises a job one priority level")] = None,
        max_running: Annotated[int | None, typer.Option(
            min=0, help="jobs running at once across all workers")] = None,
        retention_ms: Annotated[int | None, typer.Option(
            min=0, help="keep completed and cancelled jobs this long")] = None,
        dead_retention_ms: Annotated[int | None, typer.Option(
            min=0, help="keep dead jobs this long")] = None,
        clear: Annotated[list[str] | None, typer.Option(
            help="set a nullable setting to null (no limit): max_depth, aging_ms, max_running")
        ] = None,
        url: Url = DEFAULT_URL,
        token: Token = None,
        as_json: AsJson = False,
    ) -> None:
        """Change a queue's settings (only those given) and show them all."""
        given = {k: v for k, v in {
            "max_depth": max_depth, "paused": paused, "lease_ms": lease_ms,
            "max_attempts": max_attempts, "backoff_base_ms": backoff_base_ms,
            "backoff_max_ms": backoff_max_ms, "max_lease_expiries": max_lease_expiries,
            "aging_ms": aging_ms, "max_running": max_running, "retention_ms": retention_ms,
            "dead_retention_ms": dead_retention_ms,
        }.items() if v is not None}
        for name_ in clear or []:
            given[name_] = None
        with _client(url, token) as c:
            q = c.update_queue(name, extra=given)
        if as_json:
            _print_json(q)
        else:
            console.print(queue_details(q))

    schedules_app = typer.Typer(help="Recurring jobs: cron schedules (admin only).",
                                invoke_without_command=True)
    app.add_typer(schedules_app, name="schedules")

    def _show_schedule(s: Any, as_json: bool) -> None:
        _print_json(s) if as_json else console.print(schedule_details(s))

    @schedules_app.callback()
    def schedules_default(ctx: typer.Context, url: Url = DEFAULT_URL, token: Token = None,
                          as_json: AsJson = False) -> None:
        """List schedules (the same as `jobq schedules list`)."""
        _refuse_group_options(ctx)
        if ctx.invoked_subcommand is None:
            schedules_list(url, token, as_json)

    @schedules_app.command("list")
    def schedules_list(url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False) -> None:
        """List every schedule with its next and last fire."""
        with _client(url, token) as c:
            found = c.list_schedules()
        _print_json({"schedules": found}) if as_json else console.print(schedules_table(found, console.width))

    @schedules_app.command("get")
    def schedules_get(name: str, url: Url = DEFAULT_URL, token: Token = None,
                      as_json: AsJson = False) -> None:
        """Show one schedule."""
        with _client(url, token) as c:
            _show_schedule(c.get_schedule(name), as_json)

    @schedules_app.command("set")
    def schedules_set(
        name: str,
        cron: Annotated[str, typer.Option(help="5 fields, or 6 with seconds first; @hourly, @daily...")],
        type: Annotated[str, typer.Option(help="the type of the job each fire enqueues")],  # noqa: A002
        payload: Annotated[str, typer.Option(help="JSON object")] = "{}",
        queue: Annotated[str | None, typer.Option()] = None,
        priority: Annotated[int | None, typer.Option()] = None,
        max_attempts: Annotated[int | None, typer.Option(min=1)] = None,
        timezone: Annotated[str | None, typer.Option(help="IANA name; default UTC")] = None,
        misfire: Annotated[str | None, typer.Option(help="skip or run_once (default)")] = None,
        enabled: Annotated[bool, typer.Option("--enabled/--disabled")] = True,
        url: Url = DEFAULT_URL,
        token: Token = None,
        as_json: AsJson = False,
    ) -> None:
        """Create or replace a schedule (PUT: what is not given takes its default)."""
        body = _json_object(payload)
        with _client(url, token) as c:
            s = c.put_schedule(name, cron=cron, type=type, payload=body, queue=queue,
                               priority=priority, max_attempts=max_attempts, timezone=timezone,
                               misfire=misfire, enabled=enabled)
        _show_schedule(s, as_json)

    @schedules_app.command("enable")
    def schedules_enable(name: str, url: Url = DEFAULT_URL, token: Token = None,
                         as_json: AsJson = False) -> None:
        """Fire again, from the next fire time after now."""
        with _client(url, token) as c:
            _show_schedule(c.update_schedule(name, enabled=True), as_json)

    @schedules_app.command("disable")
    def schedules_disable(name: str, url: Url = DEFAULT_URL, token: Token = None,
                          as_json: AsJson = False) -> None:
        """Stop firing; the schedule stays."""
        with _client(url, token) as c:
            _show_schedule(c.update_schedule(name, enabled=False), as_json)

    @schedules_app.command("delete")
    def schedules_delete(name: str, url: Url = DEFAULT_URL, token: Token = None,
                         as_json: AsJson = False) -> None:
        """Delete a schedule; the jobs it enqueued stay."""
        with _client(url, token) as c:
            c.delete_schedule(name)
        _print_json({"deleted": name}) if as_json else console.print(f"deleted {name}")
