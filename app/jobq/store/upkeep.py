"""VACUUM and ANALYZE of one of jobq's tables, for the leader's upkeep (core/maintenance.py).

Each runs on a connection of its own, opened for it: VACUUM cannot run inside a transaction
block nor as a prepared statement, and neither may be cut short by the pool's
statement_timeout (made for requests; a VACUUM of a large table takes longer). The table's
name is an identifier, which no placeholder can carry, so these two statements are built here
rather than written in queries.sql; the name always comes from ``jobq.store.tables``.
"""

from __future__ import annotations

from typing import Literal

from psycopg import sql

from jobq.store.sessions import connect

APPLICATION_NAME = "jobq-upkeep"


async def maintain(url: str, action: Literal["VACUUM", "ANALYZE"], table: str) -> None:
    """``VACUUM table`` (never FULL: it would lock out every claim) or ``ANALYZE table``."""
    statement = sql.SQL("VACUUM {}" if action == "VACUUM" else "ANALYZE {}").format(sql.Identifier(table))
    async with await connect(url, APPLICATION_NAME) as conn:
        await conn.execute(statement)
