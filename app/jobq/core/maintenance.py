"""Upkeep of jobq's own tables where autovacuum does not do it: ANALYZE and VACUUM from the
duties leader.

A queue's tables churn: every job is inserted, updated two or three times and deleted, and
each update leaves a dead row version behind. With autovacuum off (some managed and hand-run
servers; this project's test server), or switched off for a table, nothing reclaims those
versions, so the table and its indexes grow under steady churn, and nothing refreshes the
planner's statistics. The statements are shaped so that their plans do not depend on the
statistics (migration 0011), but PostgreSQL keeps a prepared statement's generic plan until
something invalidates it, and ANALYZE is what does: a plan made while the table held ten rows
is made again once it holds a million.

So the leader, about every ``EVERY_S``, reads the statistics collector's counters for each of
jobq's tables (one statement) and, for a table that autovacuum does not look after (off for
it, or it has not got to it within ``AUTOVACUUM_GRACE_S``):

* ANALYZE once ``n_mod_since_analyze`` (rows changed since its last analyze) reaches
  ``ANALYZE_MIN_ROWS + ANALYZE_FRACTION * live rows``;
* VACUUM (never FULL) once ``n_dead_tup`` reaches ``VACUUM_MIN_ROWS + VACUUM_FRACTION *
  live rows``: the space of dead versions becomes reusable, so a table under steady churn
  stops growing (VACUUM returns no space to the operating system; the table keeps its
  largest size).

With autovacuum on and keeping up, this does nothing. Each process warns once, at its start
(or, if the database was not reachable then, at its first check as leader), when autovacuum is
off for any of jobq's tables. Failures are logged and retried at the
next check: upkeep never costs the leader its duties.
"""

from __future__ import annotations

import logging
import time
import weakref
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from jobq.core.context import Context
from jobq.store import records
from jobq.store.db import Database
from jobq.store.history import PARTITION
from jobq.store.queries import Q
from jobq.store.records import TableUpkeep
from jobq.store.tables import metadata
from jobq.store.upkeep import maintain

log = logging.getLogger("jobq.maintenance")

# How often the leader looks (one read of pg_stat_user_tables).
EVERY_S = 10.0
# ANALYZE after this many changed rows plus this fraction of the live ones (autovacuum's own
# default is 50 + 10%; jobs is set to 2% by migration 0001). Low enough that a plan is re-made
# well before the table's size has changed by an order of magnitude.
ANALYZE_MIN_ROWS = 1000
ANALYZE_FRACTION = 0.1
# VACUUM after this many dead row versions plus this fraction of the live rows. At 1,000 jobs/s
# (about 3,000 dead versions a second) the jobs table is vacuumed every few checks, so its dead
# space is reused rather than added to.
VACUUM_MIN_ROWS = 10_000
VACUUM_FRACTION = 0.1
# With autovacuum on for a table, leave it this long to do its work before doing it ourselves.
AUTOVACUUM_GRACE_S = 300.0


def tables() -> list[str]:
    """jobq's tables: those of the schema (``jobq.store.tables``); the statistics read adds
    the partitions of the partitioned ones (``jobs_history``)."""
    return sorted(metadata.tables)


@dataclass
class _State:
    warned: bool = False
    checked_at: float = float("-inf")


# Per database handle, so once per process (a process has one), whatever leader comes and goes.
_STATE: weakref.WeakKeyDictionary[Database, _State] = weakref.WeakKeyDictionary()


async def table_stats(ctx: Context) -> list[TableUpkeep]:
    return [records.table_upkeep(r) for r in await ctx.db.fetch(Q.TableUpkeepStats, {"tables": tables()})]


def _ours(table: TableUpkeep, done_at: datetime | None, now: datetime) -> bool:
    """Whether upkeep of ``table`` is ours: autovacuum is off for it, or has not done it lately."""
    if not table.autovacuum:
        return True
    return done_at is None or now - done_at > timedelta(seconds=AUTOVACUUM_GRACE_S)


def analyze_due(table: TableUpkeep, now: datetime) -> bool:
    due = table.changed_since_analyze >= ANALYZE_MIN_ROWS + ANALYZE_FRACTION * table.live
    return due and _ours(table, table.analyzed_at, now)


def vacuum_due(table: TableUpkeep, now: datetime) -> bool:
    due = table.dead >= VACUUM_MIN_ROWS + VACUUM_FRACTION * table.live
    return due and _ours(table, table.vacuumed_at, now)


def _warn_once(state: _State, stats: list[TableUpkeep]) -> None:
    if state.warned:
        return
    state.warned = True
    off = [t.name for t in stats if not t.autovacuum]
    if off:
        # The history's dated partitions (32 with the defaults) are counted, not listed: the
        # line is read by people.
        dated = [n for n in off if PARTITION.match(n)]
        named = [n for n in off if not PARTITION.match(n)]
        if dated:
            named.append(f"{len(dated)} dated partitions of jobs_history")
        log.warning("autovacuum is off for jobq's tables %s (the server's autovacuum setting, "
                    "or the table's autovacuum_enabled): this service will ANALYZE and VACUUM "
                    "them itself from the duties leader; see README, \"Operating it\"",
                    ", ".join(named))


async def check_at_start(ctx: Context) -> None:
    """Every process, at start: warn (once) when autovacuum is off for jobq's tables. A
    database not reachable yet is no error here: the leader's first check warns instead."""
    try:
        _warn_once(_STATE.setdefault(ctx.db, _State()), await table_stats(ctx))
    except Exception as exc:
        log.debug("autovacuum check at start skipped: %s", exc)


async def tend(ctx: Context) -> None:
    """The leader's upkeep: at most every EVERY_S, ANALYZE and VACUUM what is due."""
    state = _STATE.setdefault(ctx.db, _State())
    if time.monotonic() - state.checked_at < EVERY_S:
        return
    state.checked_at = time.monotonic()
    try:
        stats = await table_stats(ctx)
        _warn_once(state, stats)
        now = datetime.now(UTC)
        parents: set[str] = set()
        for table in stats:
            if vacuum_due(table, now):
                await maintain(ctx.db.direct_url, "VACUUM", table.name)
                log.info("vacuumed %s (%d dead row versions)", table.name, table.dead)
            if analyze_due(table, now):
                await maintain(ctx.db.direct_url, "ANALYZE", table.name)
                log.info("analyzed %s (%d rows changed since its last analyze)",
                         table.name, table.changed_since_analyze)
                if table.parent is not None:
                    parents.add(table.parent)
        # A partitioned table's own statistics (what plans over all its partitions use) are
        # made only by an ANALYZE of it by name, which autovacuum never runs.
        for parent in sorted(parents):
            await maintain(ctx.db.direct_url, "ANALYZE", parent)
            log.info("analyzed %s (its partitions changed)", parent)
    except Exception as exc:  # the next check tries again; the duties go on
        log.warning("table upkeep failed: %s", exc)
