"""``jobq queues``: alone it lists queues with their counts and lag (every queue, page after
page, or ``--limit``; ``--prefix`` searches by name); ``set`` changes a queue's settings;
``delete`` deletes one."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from jobq.cli.help_format import CommandGroup
from jobq.cli.output import AsJson, Wide, fail, print_json, print_table, show, table_width
from jobq.cli.remote import DEFAULT_URL, Token, Url, connect, refuse_group_options
from jobq.cli.views import queue_details, queues_table
from jobq.client import Client, Queue, QueueNotEmpty
from jobq.domain.queues import jobs_by_status
from jobq.domain.rates import parse_rate

app = CommandGroup(help="Queues: counts, lag, settings and deletion.", invoke_without_command=True)


MAX_PAGE = 1000  # the service's largest page (GET /v1/queues?limit=)


def list_queues(c: Client, *, prefix: str | None, limit: int | None,
                cursor: str | None) -> tuple[list[Queue], str | None]:
    """Follow the service's pages until ``limit`` queues (None: all of them); the cursor
    returned continues after the last queue shown (None: there is nothing more)."""
    found: list[Queue] = []
    while True:
        want = MAX_PAGE if limit is None else min(MAX_PAGE, limit - len(found))
        page = c.list_queues(prefix=prefix, limit=want, cursor=cursor)
        found.extend(page.queues)
        cursor = page.next_cursor
        if cursor is None or (limit is not None and len(found) >= limit):
            return found, cursor


@app.callback()
def queues_list(
    ctx: typer.Context,
    prefix: Annotated[str | None, typer.Option(help="only queues whose name starts with this")] = None,
    limit: Annotated[int | None, typer.Option(
        min=1, help="show at most this many, by name (default: every queue, page after page)")] = None,
    cursor: Annotated[str | None, typer.Option(help="start after this point (printed when more remain)")] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
    wide: Wide = False,
) -> None:
    """List queues, by name, with their counts and lag."""
    refuse_group_options(ctx)
    if ctx.invoked_subcommand is not None:
        return
    with connect(ctx) as c:
        found, more = list_queues(c, prefix=prefix, limit=limit, cursor=cursor)
    if as_json:
        print_json({"queues": found, "next_cursor": more})
        return
    width = table_width(wide)
    print_table(queues_table(found, width), width)
    if more is not None:
        # On stderr: the table on stdout stays only the table.
        typer.echo(f"({len(found)} shown; more with --limit or --cursor {more})", err=True)


@app.command("set")
def queues_set(
    ctx: typer.Context,
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
    rate_limit: Annotated[str | None, typer.Option(
        help="the pace of claims, N/P: at most N jobs handed out per P ms (or 10/1s, 100/1m), "
             "across every worker")] = None,
    rate_key: Annotated[str | None, typer.Option(
        help="with --rate-limit: an allowance per value of 'type' or of a payload field, "
             "'payload.tenant'")] = None,
    enqueue_rate: Annotated[str | None, typer.Option(
        help="producers' token bucket, N/P[:B]: N jobs per P ms, burst B (default N); "
             "beyond it enqueues get 429 queue_rate_limited")] = None,
    soft_depth: Annotated[int | None, typer.Option(
        min=1, help="waiting jobs past which a growing share of enqueues is refused")] = None,
    soft_lag_ms: Annotated[int | None, typer.Option(
        min=1, help="oldest job's wait past which the same happens")] = None,
    clear: Annotated[list[str] | None, typer.Option(
        help="set a nullable setting to null (no limit): max_depth, aging_ms, max_running, "
             "rate_limit, enqueue_rate, soft_depth, soft_lag_ms")
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
        "dead_retention_ms": dead_retention_ms, "soft_depth": soft_depth,
        "soft_lag_ms": soft_lag_ms,
    }.items() if v is not None}
    given.update(_rates(rate_limit, rate_key, enqueue_rate, as_json))
    for name_ in clear or []:
        given[name_] = None
    with connect(ctx) as c:
        q = c.update_queue(name, extra=given)
    if as_json:
        print_json(q)
    else:
        show(queue_details(q))


def _rates(rate_limit: str | None, rate_key: str | None, enqueue_rate: str | None,
           as_json: bool) -> dict[str, Any]:
    """The rate settings given on the command line, as the API takes them; exit 2 in words
    for one that is not N/P[:B]."""
    out: dict[str, Any] = {}
    try:
        if rate_limit is not None:
            if ":" in rate_limit:
                raise ValueError(f"{rate_limit!r}: a rate limit has no burst (N/P)")
            pace = parse_rate(rate_limit)
            out["rate_limit"] = {"jobs": pace.jobs, "per_ms": pace.per_ms, "key": rate_key}
        elif rate_key is not None:
            raise ValueError("--rate-key goes with --rate-limit")
        if enqueue_rate is not None:
            out["enqueue_rate"] = parse_rate(enqueue_rate).as_json()
    except ValueError as exc:
        fail(str(exc), 2, as_json=as_json)
    return out


_LIVE = ("pending", "running", "failed", "dead")
_FINISHED = ("completed", "cancelled")


def _some(q: Queue, statuses: tuple[str, ...]) -> dict[str, int]:
    return {s: n for s in statuses if (n := getattr(q.counts, s))}


def _refusal(name: str, exc: QueueNotEmpty) -> str:
    """The 409's reasons, in the command's words (``--purge``, not ``purge=true``)."""
    why = []
    if exc.counts:
        why.append(f"it holds {jobs_by_status(exc.counts)} (--purge deletes them too)")
    # The next step as a command: the service's words name purge=true and no CLI command.
    if exc.schedules:
        why.append("schedules " + ", ".join(exc.schedules) + " enqueue to it (`jobq schedules delete "
                   "SCHEDULE`, or `jobq schedules set` it with another --queue)")
    if exc.topics:
        why.append("it is subscribed to topics " + ", ".join(exc.topics)
                   + f" (`jobq topics unsubscribe TOPIC {name}`)")
    return f"queue {name!r} not deleted: " + "; ".join(why or [str(exc)])


@app.command("delete")
def queues_delete(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="the queue")],
    purge: Annotated[bool, typer.Option(
        "--purge", help="delete its waiting, running, failed and dead jobs too (running ones "
        "lose their leases); without it a queue holding any is refused")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="no question asked")] = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Delete a queue, its settings and its completed and cancelled jobs (asks first).

    Refused while it holds waiting, running, failed or dead jobs (unless --purge), or while
    schedules or topic subscriptions name it (delete or unsubscribe those first)."""
    if not yes and not sys.stdin.isatty():
        fail(f"this would delete queue {name!r}; pass --yes to confirm (there is no terminal "
             "to ask)", code=2, as_json=as_json)
    with connect(ctx) as c:
        q = c.queue(name)
        live = _some(q, _LIVE) if purge else {}
        finished = _some(q, _FINISHED)
        # Without --purge, a queue holding jobs is refused: no question first.
        if not yes and (purge or not _some(q, _LIVE)):
            jobs = [jobs_by_status(live) if live else "", jobs_by_status(finished) if finished else ""]
            also = " and ".join(j for j in jobs if j)
            question = f"Delete queue {name!r}" + (f" with its {also}" if also else "") + "?"
            if not typer.confirm(question, default=False, err=True):
                fail("nothing deleted", code=1, as_json=as_json)
        try:
            c.delete_queue(name, purge=purge)
        except QueueNotEmpty as exc:
            fail(_refusal(name, exc), as_json=as_json,
                 fields={"status": exc.status, "code": exc.code, "counts": exc.counts,
                         "schedules": exc.schedules, "topics": exc.topics})
    if as_json:
        print_json({"deleted": name, "purged": live, "finished": finished})
        return
    what = [f"purged {jobs_by_status(live)}" if live else "",
            f"deleted {jobs_by_status(finished)}" if finished else ""]
    done = "; ".join(w for w in what if w)
    show(f"deleted queue {name}" + (f" ({done})" if done else ""))
