"""Ad-hoc reads whose filters vary: built with SQLAlchemy Core, run on the psycopg pool."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, Text, cast, func, literal_column, or_, select, true, union_all
from sqlalchemy.dialects import postgresql

from jobq.domain.jobs import SEARCH_SCAN, JobStatus
from jobq.store.tables import jobs, jobs_history, queues

_DIALECT = postgresql.psycopg.dialect()  # type: ignore[attr-defined]

# One index serves listing: jobs by queue, status and id (migration 0006 dropped the one by
# status and id, which every claim and ack wrote). A page is therefore read one (queue,
# status) at a time and the parts merged: each part reads at most a page from that index,
# whatever the table holds.
_STATUSES = tuple(s.value for s in JobStatus)
# Finished jobs are in jobs_history (migration 0010); their statuses are read from both tables,
# so that a row left in jobs (by hand) is still listed. Live ones are only ever in jobs.
_FINISHED = ("completed", "dead", "cancelled")
# The columns of a job in both tables (jobs_history has expires_at too).
_HISTORY_COLUMNS = [jobs_history.c[c.name] for c in jobs.columns]


def _part(queue: Any, status: str, type_: str | None, before_id: int | None, scope: str | None,
          limit: int) -> Select[Any]:
    """The newest ``limit`` jobs of one queue in one status, from the table(s) that hold it."""
    if status not in _FINISHED:
        return _table_part(jobs, list(jobs.columns), queue, status, type_, before_id, scope, limit)
    parts = [_table_part(t, cols, queue, status, type_, before_id, scope, limit).subquery().select()
             for t, cols in ((jobs, list(jobs.columns)), (jobs_history, _HISTORY_COLUMNS))]
    merged = union_all(*parts).subquery("finished")
    return select(merged).order_by(merged.c.id.desc()).limit(limit)


def _table_part(table: Any, columns: list[Any], queue: Any, status: str, type_: str | None,
                before_id: int | None, scope: str | None, limit: int) -> Select[Any]:
    """The newest ``limit`` jobs of one queue in one status.

    The status is asked for as a range of one value and the rows ordered by status then id:
    the same rows in the same order, but no index other than ``(queue, status, id)`` yields
    that order. Asked for with ``=``, the status drops out of the order and the planner may
    walk the primary key backwards instead, betting on finding the page soon: measured at
    10^5 jobs of each status, that bet read every job of the table's newest queue first."""
    # A literal (one of _STATUSES, checked by jobs_page): a generic plan then still knows the
    # range holds one value.
    value = literal_column(f"'{status}'")
    c = table.c
    stmt = select(*columns).where(c.queue == queue, c.status.between(value, value))
    if type_ is not None:
        stmt = stmt.where(c.type == type_)
    if scope is not None:  # the caller's queues, as a regular expression
        stmt = stmt.where(c.queue.regexp_match(scope))
    if before_id is not None:
        stmt = stmt.where(c.id < before_id)
    return stmt.order_by(c.status.desc(), c.id.desc()).limit(limit)


def jobs_page(
    *, queue: str | None, status: str | None, type_: str | None, before_id: int | None, limit: int,
    scope: str | None = None, search: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """Newest first, keyset-paginated on id (``before_id`` is the last id of the previous
    page); ``scope`` keeps the queues a token may read. Fetches one row more than asked, to
    know whether another page follows.

    With ``search``, the newest ``SEARCH_SCAN`` jobs the other filters select are examined
    and those whose payload (as JSON text) or last_error contain it, ignoring case, are
    returned; each row also carries ``scan_low`` and ``scan_n`` (the lowest id examined and
    how many were), and a page with no match is one row of those two and NULL job columns."""
    if status is not None and status not in _STATUSES:
        raise ValueError(f"no such status: {status!r}")
    if search is None:
        stmt = _newest(queue, status, type_, before_id, scope, limit + 1)
    else:
        # A bounded scan, not an index search: no index can find a substring of the payload
        # cheaply, so the cost of a page is capped by the number of jobs it examines (as
        # Sidekiq's searches cap their SCAN), and a page may hold fewer matches than asked.
        scanned = _newest(queue, status, type_, before_id, scope, SEARCH_SCAN).cte("scanned")
        span = select(func.min(scanned.c.id).label("scan_low"),
                      func.count().label("scan_n")).select_from(scanned).subquery("span")
        hits = select(scanned).where(or_(
            cast(scanned.c.payload, Text).icontains(search, autoescape=True),
            scanned.c.last_error.icontains(search, autoescape=True),
        )).order_by(scanned.c.id.desc()).limit(limit + 1).lateral("hits")
        stmt = select(span.c.scan_low, span.c.scan_n, hits).select_from(
            span.outerjoin(hits, true())).order_by(hits.c.id.desc())
    compiled = stmt.compile(dialect=_DIALECT)
    return str(compiled), dict(compiled.params)


def _newest(queue: str | None, status: str | None, type_: str | None, before_id: int | None,
            scope: str | None, n: int) -> Select[Any]:
    """The newest ``n`` jobs the filters select, newest first."""
    if queue is None and status is None:
        # Every job, newest first: the primary key of jobs and the id index of each history
        # partition, in order, merged.
        halves = []
        for table, columns in ((jobs, list(jobs.columns)), (jobs_history, _HISTORY_COLUMNS)):
            half = select(*columns)
            if type_ is not None:
                half = half.where(table.c.type == type_)
            if scope is not None:
                half = half.where(table.c.queue.regexp_match(scope))
            if before_id is not None:
                half = half.where(table.c.id < before_id)
            halves.append(half.order_by(table.c.id.desc()).limit(n).subquery().select())
        every = union_all(*halves).subquery("every")
        stmt = select(every).order_by(every.c.id.desc()).limit(n)
    elif queue is not None:
        # One queue: one part per status asked for, merged.
        parts = [_part(queue, s, type_, before_id, scope, n) for s in ((status,) if status else _STATUSES)]
        if len(parts) == 1:
            stmt = parts[0]
        else:
            merged = union_all(*(p.subquery().select() for p in parts)).subquery("page")
            stmt = select(merged).order_by(merged.c.id.desc()).limit(n)
    else:
        # One status in every queue: a part per queue, merged.
        assert status is not None
        q = select(queues.c.name)
        if scope is not None:
            q = q.where(queues.c.name.regexp_match(scope))
        names = q.subquery("q")
        # Finished statuses from jobs_history alone here: a part per table would not be
        # correlated to the queue in a lateral join.
        table, columns = ((jobs_history, _HISTORY_COLUMNS) if status in _FINISHED
                          else (jobs, list(jobs.columns)))
        part = _table_part(table, columns, names.c.name, status, type_, before_id, None,
                           n).lateral("part")
        stmt = select(part).select_from(names.join(part, literal_column("true"))).order_by(
            part.c.id.desc()).limit(n)
    return stmt
