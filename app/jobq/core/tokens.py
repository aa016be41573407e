"""Access tokens: create, list, revoke, and the table each replica checks requests against.

Checking a request must not cost a database round trip (it sits on every enqueue and ack),
so each process keeps the live tokens in memory and re-reads them every ``REFRESH_S``. That
bounds how long a revoked token still works on any replica, and how long a replica takes to
leave local mode after the first token is created elsewhere (by ``jobq tokens create`` on
the database, or on another replica). A token created or revoked through this process's
own API applies here at once. Handing out jobs does not wait for the next read: every claim
statement checks its token in the database itself (jobq.core.leases.claim_once), and one
that finds it revoked tells this table (``seen_revoked``).

Until the first read succeeds the table knows nothing, and says so (``loaded`` is False):
the API then answers 503 rather than guess between local mode and a locked door.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Set
from dataclasses import dataclass
from datetime import datetime

from jobq.domain.access import (
    BOOTSTRAP_ADMIN,
    LOCAL,
    Principal,
    QueuePattern,
    Role,
    new_token,
    same_secret,
    token_hash,
    token_id_of,
)
from jobq.domain.errors import NotFound
from jobq.domain.rates import Bucket
from jobq.store import records
from jobq.store.db import Database, dumps_json
from jobq.store.queries import Q
from jobq.store.records import TokenRecord

log = logging.getLogger("jobq.tokens")

REFRESH_S = 0.5


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A token as listed: never its secret, nor the hash of it."""

    id: str
    name: str | None
    role: Role
    queues: str
    created_at: datetime
    revoked_at: datetime | None
    enqueue_rate: Bucket | None = None

    def public(self) -> dict[str, object]:
        """As ``GET /v1/tokens`` and ``jobq tokens list --json`` show it."""
        return {"id": self.id, "name": self.name, "role": self.role.value, "queues": self.queues,
                "created_at": self.created_at, "revoked_at": self.revoked_at,
                "enqueue_rate": None if self.enqueue_rate is None else self.enqueue_rate.as_json()}


def _info(t: TokenRecord) -> TokenInfo:
    assert t.created_at is not None  # the listing's statements all return it
    return TokenInfo(t.id, t.name, Role(t.role), t.queues, t.created_at, t.revoked_at,
                     Bucket.of(t.enqueue_rate))


async def create(db: Database, role: Role, queues: str = "*", name: str | None = None,
                 enqueue_rate: Bucket | None = None) -> tuple[TokenInfo, str]:
    """A new token: its listing, and the token itself, which is shown once and not kept.
    ``enqueue_rate``: its own token bucket of enqueues (issue 29), on top of the queues'."""
    pattern = QueuePattern(queues)  # ValueError for a malformed one, before anything is written
    token_id, token = new_token()
    rate = None if enqueue_rate is None else dumps_json(enqueue_rate.as_json())
    row = await db.fetch_one(Q.TokenInsert, {"id": token_id, "name": name, "role": role.value,
                                             "queues": pattern.text, "hash": token_hash(token),
                                             "enqueue_rate": rate})
    assert row is not None
    return _info(records.token(row)), token


async def list_all(db: Database) -> list[TokenInfo]:
    return [_info(records.token(r)) for r in await db.fetch(Q.TokenList)]


async def set_rate(db: Database, token_id: str, enqueue_rate: Bucket | None) -> TokenInfo:
    """Set or clear (None) a token's enqueue rate; every replica applies it within REFRESH_S."""
    rate = None if enqueue_rate is None else dumps_json(enqueue_rate.as_json())
    row = await db.fetch_one(Q.TokenSetRate, {"id": token_id, "enqueue_rate": rate})
    if row is None:
        raise NotFound(f"token {token_id!r} does not exist")
    return _info(records.token(row))


async def revoke(db: Database, token_id: str) -> TokenInfo:
    row = await db.fetch_one(Q.TokenRevoke, {"id": token_id})
    if row is None:
        raise NotFound(f"token {token_id!r} does not exist")
    return _info(records.token(row))


@dataclass(frozen=True, slots=True)
class _Live:
    hash: str
    principal: Principal


class TokenTable:
    """The live tokens of the database, as this process last read them, plus the bootstrap
    admin token of the environment."""

    def __init__(self, db: Database, admin_token: str | None) -> None:
        self.db = db
        self.admin_token = admin_token
        self._admin_hash = token_hash(admin_token) if admin_token else None
        self.loaded = False
        self._live: dict[str, _Live] = {}
        # Whether the database ever had a token. Revoking the last one must not re-open the
        # service to anyone: it may be bound to a public address by then (jobq serve allows
        # that once a token exists).
        self._ever = False
        # One read at a time, applied in the order begun: a periodic read that began before
        # a change made here must not end after the read that follows the change, and undo it.
        self._reading = asyncio.Lock()
        # Told the ids of tokens that stopped being live (revoked here or elsewhere), so that
        # long-polls waiting under them end now rather than at the end of their wait.
        self._revoked_listeners: list[Callable[[Set[str]], None]] = []
        # Tokens revoked here whose revocation the table has not read back yet: a read that
        # began before the revocation committed still holds them, and must not put them back
        # in the gap before the read that follows it (a long-poll woken by the revocation
        # would find its token live again).
        self._forgotten: set[str] = set()
        # Tokens a claim statement found revoked in the database (another replica revoked
        # them) before this table read it: refused here at once. Each stays until a read
        # that does not list it: a read that began before the revocation committed still
        # does, and must not put it back.
        self._seen_revoked: set[str] = set()

    @property
    def local_mode(self) -> bool:
        """No token ever: anyone who can reach the (loopback) address may do anything."""
        return not self.admin_token and not self._ever

    def authenticate(self, token: str) -> Principal | None:
        """The caller a token names; None when it names nobody. Constant-time in the secret:
        the id picks the candidate, then the hashes are compared whole."""
        token_id = token_id_of(token)
        if token_id is not None:
            live = self._live.get(token_id)
            # Hash even for an unknown id, so that a miss takes as long as a wrong secret.
            presented = token_hash(token)
            if live is not None and same_secret(presented, live.hash):
                return live.principal
            return None
        # Hashes of both, compared whole: the time taken says nothing of the secret's length.
        if self._admin_hash is not None and same_secret(token_hash(token), self._admin_hash):
            return BOOTSTRAP_ADMIN
        return None

    def still_valid(self, principal: Principal) -> bool:
        """Whether a caller authenticated earlier (a long-poll that waits) may still be served:
        its token is live in the table as last read. A dict lookup, no hashing. Local mode's
        anyone and the bootstrap admin have no token id: nothing revokes them here."""
        return principal.token_id is None or principal.token_id in self._live

    def on_revoked(self, listener: Callable[[Set[str]], None]) -> None:
        """Call ``listener`` with the ids of tokens that stop being live, as soon as this
        process learns of it (its own revocation at once, another's at the next read)."""
        self._revoked_listeners.append(listener)

    def _revoked(self, token_ids: Set[str]) -> None:
        for listener in self._revoked_listeners:
            try:
                listener(token_ids)
            except Exception:  # a listener's bug must not stop the table being read
                log.exception("a listener of revoked tokens failed")

    def caller(self, token: str | None) -> Principal | None:
        """Local mode's anyone without a token, else the token's principal (None: refused)."""
        if self.local_mode:
            return LOCAL
        return self.authenticate(token) if token is not None else None

    async def refresh(self) -> None:
        async with self._reading:
            await self._read()

    async def _read(self) -> None:
        live: dict[str, _Live] = {}
        for t in map(records.token, await self.db.fetch(Q.TokensLive)):
            try:
                principal = Principal(t.id, Role(t.role), QueuePattern(t.queues),
                                      Bucket.of(t.enqueue_rate))
            except (ValueError, KeyError, TypeError):  # a row written by hand, wrongly: that token opens nothing
                log.warning("token %s has an unusable role or queue pattern; it is ignored", t.id)
                continue
            assert t.hash is not None  # TokensLive reads it
            live[t.id] = _Live(t.hash, principal)
        for token_id in self._forgotten:
            live.pop(token_id, None)
        if not self._ever:  # read until the first token appears; rows are never deleted
            ever = records.scalar(await self.db.fetch_one(Q.TokensEver))
            self._ever = bool(live) or bool(ever)
        # After the last await: one seen while this read was under way is in the set by now.
        self._seen_revoked &= live.keys()
        for token_id in self._seen_revoked:
            live.pop(token_id, None)
        gone = self._live.keys() - live.keys()
        if live.keys() != self._live.keys():
            log.info("access tokens: %d live%s", len(live),
                     " (local mode)" if self.local_mode else "")
        self._live = live
        self.loaded = True
        if gone:
            self._revoked(gone)

    async def forget(self, token_id: str) -> None:
        """A revocation made by this process applies here at once: dropped now, and read
        again after any read that began before it was committed."""
        self._forgotten.add(token_id)
        try:
            if self._live.pop(token_id, None) is not None:
                self._revoked({token_id})
            await self.refresh()  # begins after any read in progress: it sees the revocation
        finally:
            self._forgotten.discard(token_id)

    def seen_revoked(self, token_id: str) -> None:
        """The database says ``token_id`` is revoked (a claim statement found it so), and this
        table may not have read it yet: refuse it from now on, and end its long-polls here,
        without waiting for the next read. Revocations are never undone."""
        self._seen_revoked.add(token_id)
        if self._live.pop(token_id, None) is not None:
            self._revoked({token_id})

    async def run(self, every_s: float = REFRESH_S) -> None:
        """Re-read the live tokens for ever. A failed read keeps the last table: revoking a
        token needs the database too, so nothing was revoked that this table misses."""
        failing = False
        while True:
            try:
                await self.refresh()
                if failing:
                    log.info("access tokens read again")
                failing = False
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not failing:
                    log.warning("could not read the access tokens: %s", exc)
                failing = True
            await asyncio.sleep(every_s)
