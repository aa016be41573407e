"""How the terminal commands show jobs, queues and schedules to people: tables that fit the
terminal (values whole, however wide, when stdout is not one, or with ``--wide``), ages and
times humanised. Scripts use ``--json`` instead (``jobq.cli.output``).

Every value a user or the service chose (a type, a payload, an error) goes in as ``Text``,
never as a markup string: ``[bold]`` in an error message is shown, not interpreted.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from jobq.client import Job, Queue, Schedule, Topic

if TYPE_CHECKING:  # the server's; `jobq tokens` has it installed when it calls
    from jobq.core.tokens import TokenInfo


def _now() -> datetime:
    return datetime.now(UTC)


def span(seconds: float) -> str:
    """``3s``, ``5m``, ``2h``, ``4d``: the largest whole unit, at most 4 characters wide
    below 10,000 days."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def age(when: datetime | None, now: datetime | None = None) -> str:
    """How long ago ``when`` was (``3s``); empty when unknown."""
    if when is None:
        return ""
    return span(((now or _now()) - when).total_seconds())


def relative(when: datetime | None, now: datetime | None = None) -> str:
    """``in 5m`` or ``3h ago``: a time near now, in the words a person reads at a glance."""
    if when is None:
        return ""
    delta = (when - (now or _now())).total_seconds()
    return f"in {span(delta)}" if delta > 0 else f"{span(-delta)} ago"


def stamp(when: datetime | None) -> str:
    """A full UTC timestamp to the second, ``2026-01-15 09:30:12Z`` (never truncated)."""
    if when is None:
        return ""
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _status(value: Any) -> str:
    return str(getattr(value, "value", value))


def fitted_table(
    headers: list[str],
    rows: list[list[str]],
    width: int | None,
    shrink: dict[str, int],
    right: frozenset[str] = frozenset(),
    ruled: bool = True,
) -> Table:
    """A table of one line per row, no wider than ``width`` when it can be: only the
    columns in ``shrink`` (free text: names, types) are shortened, widest first and never
    below their floor, with an ellipsis where a value is cut. Every other column keeps its
    values whole, so an id or a status is never cut in a misleading way. ``width`` None:
    nothing is shortened (``jobq.cli.output.table_width``: a pipe, a file, ``--wide``). ``ruled``: a rule
    under the header, at one more space between columns (padding, rule, padding)."""
    gap = 3 if ruled else 2
    widths = {h: max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)}
    excess = 0 if width is None else sum(widths.values()) + gap * (len(headers) - 1) - width
    while excess > 0:
        room = {h: widths[h] - floor for h, floor in shrink.items() if widths[h] > floor}
        if not room:
            break  # the fixed columns alone are wider: let the terminal wrap
        widest = max(room, key=lambda h: widths[h])
        widths[widest] -= 1
        excess -= 1
    table = Table(box=box.SIMPLE_HEAD if ruled else None, pad_edge=False, show_edge=False)
    for h in headers:
        table.add_column(
            h, width=widths[h], no_wrap=True, overflow="ellipsis", justify="right" if h in right else "left"
        )
    for r in rows:
        table.add_row(*(Text(v) for v in r))
    return table


def jobs_table(jobs: list[Job], width: int | None = 80, now: datetime | None = None) -> Table:
    """id, queue, type, status, attempt, age: within ``width`` columns. Only queue and type,
    free text of any length, are shortened (with an ellipsis); the id, status and attempt
    are never cut, and the age is at most 4 characters."""
    now = now or _now()
    rows = [
        [j.id, j.queue, j.type, _status(j.status), f"{j.attempt}/{j.max_attempts}", age(j.created_at, now)]
        for j in jobs
    ]
    return fitted_table(
        ["id", "queue", "type", "status", "attempt", "age"],
        rows,
        width,
        shrink={"queue": 8, "type": 10},
        right=frozenset({"id", "attempt", "age"}),
    )


def _json_text(value: Any) -> Text:
    """A JSON value, on one line when short, indented when not."""
    flat = json.dumps(value, ensure_ascii=False)
    return Text(flat if len(flat) <= 60 else json.dumps(value, indent=2, ensure_ascii=False))


def _fields(rows: list[tuple[str, Any]]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for name, value in rows:
        grid.add_row(name, value if isinstance(value, Text) else Text(str(value)))
    return grid


def _when(when: datetime | None, now: datetime) -> Text:
    return Text(f"{stamp(when)} ({relative(when, now)})")


def job_details(job: Job, now: datetime | None = None) -> RenderableType:
    """One job for a person: what it is, where it stands, its times, its payload and
    result, every failed attempt and every release. ``last_error`` is the current failure only (the
    service clears it when the job completes); the history is the errors table."""
    now = now or _now()
    rows: list[tuple[str, Any]] = [
        ("id", job.id),
        ("queue", job.queue),
        ("type", job.type),
        ("status", _status(job.status)),
        ("attempt", f"{job.attempt} of {job.max_attempts}"),
        ("priority", job.priority),
    ]
    if job.idempotency_key is not None:
        rows.append(("idempotency key", job.idempotency_key))
    if job.worker_id is not None:
        rows.append(("worker", job.worker_id))
    rows.append(("created", _when(job.created_at, now)))
    rows.append(("visible", _when(job.visible_at, now)))
    if job.locked_until is not None:
        rows.append(("lease until", _when(job.locked_until, now)))
    if job.completed_at is not None:
        rows.append(("finished", _when(job.completed_at, now)))
    rows.append(("payload", _json_text(job.payload)))
    if job.result is not None:
        rows.append(("result", _json_text(job.result)))
    if job.last_error:
        rows.append(("last error", Text(job.last_error)))
    parts: list[RenderableType] = [_fields(rows)]
    if job.errors:
        errors = Table(
            box=box.SIMPLE_HEAD,
            pad_edge=False,
            show_edge=False,
            title=f"errors ({len(job.errors)})",
            title_justify="left",
        )
        errors.add_column("attempt", justify="right", no_wrap=True)
        errors.add_column("kind", no_wrap=True)
        errors.add_column("at", no_wrap=True)
        errors.add_column("message", overflow="fold")
        for e in job.errors:
            errors.add_row(
                Text(str(e.attempt)), Text(e.kind), Text(stamp(e.at)), Text(e.error.splitlines()[0] if e.error else "")
            )
        parts.append(errors)
    if job.releases:
        # Claims handed back unfinished (a worker stopping): not failures, not counted.
        releases = Table(
            box=box.SIMPLE_HEAD,
            pad_edge=False,
            show_edge=False,
            title=f"releases ({len(job.releases)}, not counted as attempts)",
            title_justify="left",
        )
        releases.add_column("attempt", justify="right", no_wrap=True)
        releases.add_column("at", no_wrap=True)
        releases.add_column("worker", overflow="fold")
        releases.add_column("delay", justify="right", no_wrap=True)
        for r in job.releases:
            releases.add_row(Text(str(r.attempt)), Text(stamp(r.at)), Text(r.worker_id or "-"),
                             Text(span(r.delay_ms / 1000) if r.delay_ms else "0"))
        parts.append(releases)
    return Group(*parts)


_NULLABLE_WORDS = {"max_depth": "no limit", "max_running": "no limit", "aging_ms": "off",
                   "soft_depth": "off", "soft_lag_ms": "off"}


def _rate(value: dict[str, Any]) -> str:
    """``10 per 1s`` (``, per payload.tenant``; ``, burst 100``): a rate setting in words."""
    per = int(value.get("per_ms") or 0)
    shown = f"{value.get('jobs')} per {span(per / 1000) if per >= 1000 else f'{per}ms'}"
    if value.get("key"):
        shown += f", per {value['key']}"
    if value.get("burst") is not None and value.get("burst") != value.get("jobs"):
        shown += f", burst {value['burst']}"
    return shown


def rate_use(q: Queue) -> str:
    """A paced queue's use of its limit now, ``7/10`` (the busiest key's); "" for none."""
    limit, use = q.settings.rate_limit, q.rate_limit_use
    if limit is None or use is None:
        return ""
    return f"{use.get('jobs', 0)}/{limit.get('jobs')}"


def queue_details(q: Queue) -> RenderableType:
    """A queue's settings (every one the service answered, in its order) and counts."""
    settings = {k: v for k, v in {**vars(q.settings), **q.settings.extra}.items() if k != "extra"}
    rows: list[tuple[str, Any]] = [("queue", Text(q.name, style="bold"))]
    for name, value in settings.items():
        if value is None:
            shown = _NULLABLE_WORDS.get(name, "none")
        elif isinstance(value, dict) and "per_ms" in value:
            shown = _rate(value)
        elif isinstance(value, bool):
            shown = "yes" if value else "no"
        elif name.endswith("_ms") and isinstance(value, int):
            shown = f"{value} ({span(value / 1000)})" if value >= 1000 else str(value)
        else:
            shown = str(value)
        rows.append((name, shown))
    k = q.counts
    rows.append(
        (
            "counts",
            f"pending {k.pending}, running {k.running}, failed {k.failed}, "
            f"completed {k.completed}, dead {k.dead}, cancelled {k.cancelled}",
        )
    )
    use = q.rate_limit_use
    if q.settings.rate_limit is not None and use is not None:
        free = use.get("free_in_ms")
        rows.append(("rate use", f"{rate_use(q)} in the window"
                     + (f", keys {use.get('keys')} ({use.get('keys_at_limit')} at the limit)"
                        if q.settings.rate_limit.get("key") else "")
                     + (f"; room again in {free} ms" if free is not None else "")))
    return _fields(rows)


def queues_table(found: list[Queue], width: int | None = 80) -> Table:
    """Each queue's counts, how long its oldest ready job has waited, and whether it is
    paused: within ``width`` columns (only the queue's name is shortened)."""
    rows = []
    for q in found:
        k = q.counts
        lag = "" if q.oldest_waiting_ms is None else span(q.oldest_waiting_ms / 1000)
        rows.append(
            [
                q.name,
                *(str(n) for n in (k.pending, k.running, k.failed, k.completed, k.dead, k.cancelled)),
                lag,
                "yes" if q.settings.paused else "",
            ]
        )
    counts = frozenset({"pending", "running", "failed", "completed", "dead", "cancelled", "lag"})
    columns = ["queue", "pending", "running", "failed", "completed", "dead", "cancelled", "lag", "paused"]
    if any(q.settings.rate_limit is not None for q in found):
        # The rate_limit's use now (jobs in the window / the limit): only when one is set.
        columns.append("rate")
        for row, q in zip(rows, found, strict=True):
            row.append(rate_use(q))
    return fitted_table(
        columns,
        rows,
        width,
        shrink={"queue": 8},
        right=counts,
        ruled=False,
    )


def schedules_table(found: list[Schedule], width: int | None = 80, now: datetime | None = None) -> Table:
    """name, cron, job (queue:type), on, next, last: within ``width`` columns; only the
    free-text columns (name, cron, job) are shortened, with an ellipsis; the times are
    relative (``in 5m``, ``3h ago``). ``jobq schedules get`` shows everything."""
    now = now or _now()
    rows = [
        [
            s.name,
            s.cron,
            f"{s.job.queue}:{s.job.type}" if s.job.queue else s.job.type,
            "yes" if s.enabled else "no",
            relative(s.next_fire_at, now),
            relative(s.last_fired_at, now),
        ]
        for s in found
    ]
    return fitted_table(
        ["name", "cron", "job", "on", "next", "last"], rows, width, shrink={"name": 10, "cron": 11, "job": 10}
    )


def schedule_details(s: Schedule, now: datetime | None = None) -> RenderableType:
    now = now or _now()
    rows: list[tuple[str, Any]] = [
        ("name", s.name),
        ("cron", s.cron),
        ("timezone", s.timezone),
        ("misfire", s.misfire or "run_once"),
        ("enabled", "yes" if s.enabled else "no"),
        ("queue", s.job.queue or "default"),
        ("type", s.job.type),
        ("payload", _json_text(s.job.payload)),
    ]
    if s.job.priority is not None:
        rows.append(("priority", s.job.priority))
    if s.job.max_attempts is not None:
        rows.append(("max attempts", s.job.max_attempts))
    rows.append(("next fire", _when(s.next_fire_at, now) if s.next_fire_at else "none"))
    if s.last_fired_at is not None:
        rows.append(("last fired", _when(s.last_fired_at, now)))
    if s.last_job_id is not None:
        rows.append(("last job", s.last_job_id))
    return _fields(rows)


def topics_table(topics: list[Topic], width: int | None = 80) -> Table:
    """topic, queue, type override, subscribed (age): within ``width`` columns, like the
    other listings; only the free-text names are shortened."""
    rows = [[t.name, s.queue, s.type or "", age(s.created_at)] for t in topics for s in t.subscriptions]
    return fitted_table(
        ["topic", "queue", "type override", "subscribed"],
        rows,
        width,
        shrink={"topic": 8, "queue": 8, "type override": 10},
        right=frozenset({"subscribed"}),
    )


def short_time(value: datetime | None) -> str:
    """``2026-01-15 09:30`` in UTC, for a listing's times read whole; empty when unknown."""
    return "" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def tokens_table(found: list[TokenInfo], width: int | None = 80) -> Table:
    """id, name, role, queues, created, revoked: the plain 80-column table of the other
    listings. Ids and times are copied and read whole: only the free-text name and queue
    pattern are shortened (with an ellipsis); ``--json`` has them whole."""
    rows = [[i.id, i.name or "", i.role.value, i.queues, short_time(i.created_at), short_time(i.revoked_at)]
            for i in found]
    return fitted_table(["id", "name", "role", "queues", "created (UTC)", "revoked (UTC)"], rows,
                        width, shrink={"name": 6, "queues": 6})
