"""Connection options for every connection the service keeps open: how soon a dead peer is
noticed.

A PostgreSQL server that is killed or restarted closes its sockets, and we learn it on the
next read. One that vanishes from the network (a host powered off, a failover that moves an
address) sends nothing: without these, a LISTEN connection or the leader's session would
wait on it for the kernel's TCP timeout (minutes to hours), keeping the process deaf to
other processes' notifications, or the duties stopped, long after a new primary is up.
"""

from __future__ import annotations

from typing import Any

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
