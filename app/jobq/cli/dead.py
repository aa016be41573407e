"""``jobq dead``: the dead-letter queue; alone it lists dead jobs, ``replay`` and ``purge``
act on them."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from jobq.cli.help_format import CommandGroup
from jobq.cli.jobs import Cursor, Every, Limit, list_jobs, print_jobs
from jobq.cli.output import AsJson, Wide, fail, print_json, show
from jobq.cli.remote import DEFAULT_URL, Token, Url, connect, refuse_group_options

app = CommandGroup(help="The dead-letter queue: list (the default), replay, purge.", invoke_without_command=True)

Queue = Annotated[str | None, typer.Option()]
Type = Annotated[str | None, typer.Option()]


@app.callback()
def dead_default(ctx: typer.Context, queue: Queue = None, type: Type = None,  # noqa: A002
                 limit: Limit = 100, every: Every = False, cursor: Cursor = None,
                 url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False,
                 wide: Wide = False) -> None:
    """The dead-letter queue; alone, lists dead jobs (the same as `jobq dead list`)."""
    refuse_group_options(ctx)
    if ctx.invoked_subcommand is None:
        dead_list(ctx, queue, type, limit, every, cursor, url, token, as_json, wide)


@app.command("list")
def dead_list(ctx: typer.Context, queue: Queue = None, type: Type = None,  # noqa: A002
              limit: Limit = 100, every: Every = False, cursor: Cursor = None,
              url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False,
              wide: Wide = False) -> None:
    """List dead jobs, newest first."""
    with connect(ctx) as c:
        found, more = list_jobs(c, queue=queue, status="dead", type_=type, limit=limit,
                                every=every, cursor=cursor)
    print_jobs(found, more, as_json, wide)


@app.command("replay")
def dead_replay(ctx: typer.Context, queue: Queue = None, type: Type = None,  # noqa: A002
                limit: Annotated[int | None, typer.Option(min=1)] = None,
                url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False) -> None:
    """Send matching dead jobs back to pending."""
    with connect(ctx) as c:
        n = c.replay_dead(queue=queue, type=type, limit=limit)
    print_json({"replayed": n}) if as_json else show(f"replayed {n}")


@app.command("purge")
def dead_purge(ctx: typer.Context, queue: Queue = None, type: Type = None,  # noqa: A002
               limit: Annotated[int | None, typer.Option(min=1)] = None,
               yes: Annotated[bool, typer.Option(
                   "--yes", help="no question asked when no --queue or --type is given")] = False,
               url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False) -> None:
    """Delete matching dead jobs; with no --queue or --type, every dead job (asks first)."""
    if queue is None and type is None and not yes:
        what = ("the oldest dead job" if limit == 1 else f"the {limit} oldest dead jobs" if limit
                else "every dead job")
        if not sys.stdin.isatty():
            fail(f"no --queue or --type: this would delete {what} in every queue; pass "
                 "--yes to confirm (there is no terminal to ask)", code=2, as_json=as_json)
        if not typer.confirm(f"Delete {what} in every queue?", default=False, err=True):
            fail("nothing purged", code=1, as_json=as_json)
    with connect(ctx) as c:
        n = c.purge_dead(queue=queue, type=type, limit=limit)
    print_json({"purged": n}) if as_json else show(f"purged {n}")
