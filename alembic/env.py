"""Alembic environment. ``jobq migrate`` (app/jobq/store/migrate.py) hands in a connection that
already holds the migration advisory lock; plain ``alembic`` use builds its own from
JOBQ_DATABASE_URL."""

from __future__ import annotations

import os

from alembic import context

from jobq.store.migrate import engine
from jobq.store.tables import metadata

config = context.config
target_metadata = metadata


def run_migrations_offline() -> None:
    # SQL for PostgreSQL, whatever the URL: SQLAlchemy need not parse one (see store/migrate.py).
    context.configure(dialect_name="postgresql", target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=metadata)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = (config.attributes.get("libpq_url") or config.get_main_option("sqlalchemy.url")
           or os.environ["JOBQ_DATABASE_URL"])
    with engine(url).connect() as conn:
        context.configure(connection=conn, target_metadata=metadata)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
