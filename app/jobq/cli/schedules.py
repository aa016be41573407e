"""``jobq schedules``: recurring jobs on cron schedules (admin only); alone it lists them."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from jobq.cli.help_format import CommandGroup
from jobq.cli.output import AsJson, Wide, print_json, print_table, show, table_width
from jobq.cli.remote import DEFAULT_URL, Token, Url, connect, json_object, refuse_group_options
from jobq.cli.views import schedule_details, schedules_table
from jobq.client import NotFound, Schedule

app = CommandGroup(help="Recurring jobs: cron schedules (admin only).", invoke_without_command=True)

Name = Annotated[str, typer.Argument(help="the schedule's name")]


def show_schedule(s: Any, as_json: bool) -> None:
    print_json(s) if as_json else show(schedule_details(s))


@app.callback()
def schedules_default(ctx: typer.Context, url: Url = DEFAULT_URL, token: Token = None,
                      as_json: AsJson = False, wide: Wide = False) -> None:
    """List schedules (the same as `jobq schedules list`)."""
    refuse_group_options(ctx)
    if ctx.invoked_subcommand is None:
        schedules_list(ctx, url, token, as_json, wide)


@app.command("list")
def schedules_list(ctx: typer.Context, url: Url = DEFAULT_URL, token: Token = None,
                   as_json: AsJson = False, wide: Wide = False) -> None:
    """List every schedule with its next and last fire."""
    with connect(ctx) as c:
        found = c.list_schedules()
    if as_json:
        print_json({"schedules": found})
        return
    width = table_width(wide)
    print_table(schedules_table(found, width), width)


@app.command("get")
def schedules_get(ctx: typer.Context, name: Name, url: Url = DEFAULT_URL, token: Token = None,
                  as_json: AsJson = False) -> None:
    """Show one schedule."""
    with connect(ctx) as c:
        show_schedule(c.get_schedule(name), as_json)


@app.command("set")
def schedules_set(
    ctx: typer.Context,
    name: Name,
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
    """Create or replace a schedule (PUT: what is not given takes its default, the payload
    too); replacing one says, on stderr, what it was."""
    body = json_object(ctx, payload)
    with connect(ctx) as c:
        # Read first, only to tell the user: a replace is whole, and an option left out (a
        # --payload, say) silently drops what the old schedule had.
        try:
            before: Schedule | None = c.get_schedule(name)
        except NotFound:
            before = None
        s = c.put_schedule(name, cron=cron, type=type, payload=body, queue=queue,
                           priority=priority, max_attempts=max_attempts, timezone=timezone,
                           misfire=misfire, enabled=enabled)
    if before is not None and not as_json:
        typer.echo(f"jobq: replaced schedule {name} (was: {schedule_summary(before)})", err=True)
    show_schedule(s, as_json)


def schedule_summary(s: Schedule) -> str:
    """A schedule on one line, everything a replace would lose: ``cron "0 2 * * *" in
    Europe/Berlin, queue reports, type report.nightly, payload {"format": "pdf"}``."""
    parts = [f"cron {json.dumps(s.cron)}" + (f" in {s.timezone}" if s.timezone not in (None, "UTC") else ""),
             f"queue {s.job.queue or 'default'}", f"type {s.job.type}",
             f"payload {json.dumps(s.job.payload, ensure_ascii=False)}"]
    if s.job.priority:  # 0, the default, goes without saying
        parts.append(f"priority {s.job.priority}")
    if s.job.max_attempts is not None:
        parts.append(f"max attempts {s.job.max_attempts}")
    if s.misfire not in (None, "run_once"):
        parts.append(f"misfire {s.misfire}")
    if not s.enabled:
        parts.append("disabled")
    return ", ".join(parts)


@app.command("enable")
def schedules_enable(ctx: typer.Context, name: Name, url: Url = DEFAULT_URL, token: Token = None,
                     as_json: AsJson = False) -> None:
    """Fire again, from the next fire time after now."""
    with connect(ctx) as c:
        show_schedule(c.update_schedule(name, enabled=True), as_json)


@app.command("disable")
def schedules_disable(ctx: typer.Context, name: Name, url: Url = DEFAULT_URL, token: Token = None,
                      as_json: AsJson = False) -> None:
    """Stop firing; the schedule stays."""
    with connect(ctx) as c:
        show_schedule(c.update_schedule(name, enabled=False), as_json)


@app.command("delete")
def schedules_delete(ctx: typer.Context, name: Name, url: Url = DEFAULT_URL, token: Token = None,
                     as_json: AsJson = False) -> None:
    """Delete a schedule; the jobs it enqueued stay."""
    with connect(ctx) as c:
        c.delete_schedule(name)
    print_json({"deleted": name}) if as_json else show(f"deleted {name}")
