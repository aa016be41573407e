"""The service's database, as the bench sees it: the settings that move the figures, and
tidying between measurements so that none runs on the dead rows of the one before."""

from __future__ import annotations

import psycopg


def database_facts(database_url: str) -> dict[str, str] | None:
    """Settings that move the figures a lot: a server without autovacuum bloats the queue
    table run after run (claims then wade through dead index entries), and synchronous_commit
    decides what a commit costs."""
    facts: dict[str, str] = {}
    try:
        with psycopg.connect(database_url, connect_timeout=5) as conn:
            for name in ("server_version", "autovacuum", "synchronous_commit", "fsync"):
                row = conn.execute(f"SHOW {name}").fetchone()
                facts[name] = "" if row is None else str(row[0])
    except psycopg.Error:
        return None
    return facts


class Tidy:
    """Between measurements: remove the jobs this run made and, when the server has autovacuum
    off, VACUUM the jobs table, so that every measurement starts on a table without the dead
    rows of the ones before it. Without this the raw-SQL ceiling, measured after the HTTP
    phases, ran on more garbage than they did, and a reused database slowed run after run
    (single-mode drain fell from 567 to 115 jobs/s over a day's runs). Only rows of this run's
    queues are touched."""

    def __init__(self, database_url: str, base: str, vacuum: bool) -> None:
        self.url, self.prefix, self.vacuum = database_url, f"{base}.", vacuum

    def __call__(self) -> None:
        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            conn.execute("DELETE FROM jobs WHERE starts_with(queue, %s)", (self.prefix,))
            # Finished jobs and their keys (migration 0010); the triggers keep the counters.
            conn.execute("DELETE FROM jobs_history WHERE starts_with(queue, %s)", (self.prefix,))
            conn.execute("DELETE FROM job_keys WHERE starts_with(queue, %s)", (self.prefix,))
            if self.vacuum:
                conn.execute("VACUUM jobs")  # not ANALYZE: statistics of an emptied table mislead plans


def no_tidy() -> None:
    return None
