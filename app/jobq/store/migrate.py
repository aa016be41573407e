"""Schema migrations: Alembic, under an advisory lock so that replicas starting together
do not both migrate. The lock is a session's: migrations run on JOBQ_DIRECT_DATABASE_URL,
never through a transaction pooler."""

from __future__ import annotations

import logging
import time

import psycopg
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, pool, text

from jobq import bundled
from jobq.store.sessions import CONNECT_TIMEOUT_S

log = logging.getLogger("jobq.migrate")

# Any fixed 64-bit key will do; it only has to differ from our other advisory locks.
MIGRATION_LOCK_KEY = 0x6A6F6271_0001  # "jobq" + 1
LOCK_RETRY_S = 0.2
APPLICATION_NAME = "jobq-migrate"


def libpq_form(url: str) -> str:
    """``url`` as libpq reads it: without SQLAlchemy's driver suffix."""
    for prefix in ("postgresql+psycopg://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql://" + url[len(prefix):]
    return url


def engine(libpq_url: str) -> Engine:
    """A SQLAlchemy engine whose connections psycopg opens from the libpq URL itself.
    SQLAlchemy's own URL parser reads a multi-host URL (``h1:p1,h2:p2``, with
    ``target_session_attrs``) as one host with the port ``p1,h2:p2`` and fails; libpq
    understands it, and tries the hosts in turn for the one that takes writes."""
    url = libpq_form(libpq_url)
    return create_engine("postgresql+psycopg://", poolclass=pool.NullPool,
                         creator=lambda: psycopg.connect(url, application_name=APPLICATION_NAME,
                                                         connect_timeout=CONNECT_TIMEOUT_S))


def alembic_config(libpq_url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(bundled.migrations()))
    # Not as sqlalchemy.url, which SQLAlchemy would parse (see ``engine``). env.py reads it
    # when alembic is run by hand on this Config.
    cfg.attributes["libpq_url"] = libpq_url
    return cfg


def head_revision() -> str | None:
    cfg = Config()
    cfg.set_main_option("script_location", str(bundled.migrations()))
    return ScriptDirectory.from_config(cfg).get_current_head()


def _lock(conn: Connection) -> None:
    """Take the migration lock, waiting between tries rather than inside a statement: a
    session waiting in pg_advisory_lock holds a snapshot, and CREATE INDEX CONCURRENTLY in
    the migrating session waits for every older snapshot, so the two would deadlock."""
    while True:
        got = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": MIGRATION_LOCK_KEY}).scalar()
        conn.commit()
        if got:
            return
        time.sleep(LOCK_RETRY_S)


def migrate(libpq_url: str) -> None:
    """Apply pending migrations. Safe to call from several processes at once."""
    migrations = engine(libpq_url)
    try:
        with migrations.connect() as conn:
            _lock(conn)
            try:
                cfg = alembic_config(libpq_url)
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
                conn.commit()
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK_KEY})
                conn.commit()
    finally:
        migrations.dispose()
    log.info("schema is at revision %s", head_revision())
