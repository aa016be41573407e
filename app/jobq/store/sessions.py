"""Connections the service keeps besides its pool, and the options of every connection it
keeps open: how soon a dead peer is noticed.

A PostgreSQL server that is killed or restarted closes its sockets, and we learn it on the
next read. One that vanishes from the network (a host powered off, a failover that moves an
address) sends nothing: without these, a LISTEN connection or the leader's session would
wait on it for the kernel's TCP timeout (minutes to hours), keeping the process deaf to
other processes' notifications, or the duties stopped, long after a new primary is up.
"""

from __future__ import annotations

from typing import Any

import psycopg

CONNECT_TIMEOUT_S = 5

# libpq's keepalives (a probe after 5 s idle, every 2 s, 3 missed: gone in about 11 s) and
# tcp_user_timeout (data sent but unacknowledged for 10 s: gone).
KEEPALIVE: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 10_000,
}


async def connect(url: str, application_name: str, **kwargs: Any) -> psycopg.AsyncConnection[Any]:
    """A connection of its own (outside the pool) for one of the service's sessions: LISTEN,
    the duties' lock, the leader's upkeep. Autocommit; never prepares statements, so that
    nothing breaks if the URL turns out to reach a pooler after all."""
    return await psycopg.AsyncConnection.connect(
        url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, prepare_threshold=None,
        application_name=application_name, **KEEPALIVE, **kwargs)


# What a server that has no connection slot left for us says, in its words: PostgreSQL
# ("sorry, too many clients already", "remaining connection slots are reserved for …", "too
# many connections for role/database …") and pgbouncer ("no more connections allowed
# (max_client_conn)"). A connection refused at start is not an error to exit on: slots free
# up as other replicas' pools give back idle connections.
_NO_SLOT = ("too many clients", "too many connections", "remaining connection slots",
            "no more connections allowed")


def no_free_slot(exc: BaseException | str) -> bool:
    """Whether a failed connection failed for want of a free connection slot."""
    text = str(exc).lower()
    return any(words in text for words in _NO_SLOT)
