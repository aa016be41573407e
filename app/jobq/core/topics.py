"""Fan-out topics: a publish enqueues one job per subscribed queue, all in one transaction.

A topic is its subscriptions, nothing more: (topic, queue, optional type override). A
publish locks the topic's subscription rows ``FOR SHARE``, checks the caller may enqueue to
every one of those queues, and enqueues through ``enqueue.insert_many``, the batch path of
``POST /v1/jobs/batch`` (max_depth, counters, idempotency keys, NOTIFY after commit), so a
publish is exactly a batch whose queues come from the topic. Any refusal (a full queue, a
queue outside the token's pattern, a conflicting key) rolls all of it back.

Each job is an ordinary job of its queue, with that queue's retries and dead-letter
handling. A publish with an ``idempotency_key`` gives each job the key
``topic:{topic}/{key}``; keys are unique per queue, so each subscribed queue holds at most
one job per publish key, and a repeated publish answers the jobs of the first. A queue
without such a job (subscribed since, or its job deleted by retention) gets one. Producers
cannot send ``topic:`` keys themselves (the API refuses them), so only publishes make them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobq.core import counters
from jobq.core import enqueue as enq
from jobq.core.context import Context
from jobq.domain.errors import NotFound
from jobq.domain.jobs import NewJob
from jobq.domain.jsontext import same_json
from jobq.store import records
from jobq.store.queries import Q
from jobq.store.records import SubscriptionRecord


@dataclass(frozen=True, slots=True)
class Subscription:
    topic: str
    queue: str
    type: str | None
    created_at: datetime

    def public(self) -> dict[str, Any]:
        return {"queue": self.queue, "type": self.type, "created_at": self.created_at}


@dataclass(frozen=True, slots=True)
class Published:
    jobs: list[enq.Enqueued]

    @property
    def created(self) -> bool:
        """True when this publish enqueued anything (not a replay, not a topic without
        subscribers)."""
        return any(e.created for e in self.jobs)


def job_key(topic: str, key: str) -> str:
    """The idempotency key each job of a publish carries (unique per queue, like any key).
    A topic name holds no "/", so two topics' keys never read the same: topics "a" and
    "a:b" could not be told apart with a ":" ("topic:a:b:c" is "a" with "b:c", or "a:b"
    with "c")."""
    return f"topic:{topic}/{key}"


# A job found by its publish key is the same publish when its payload is the same. Its type
# is not compared: it is the subscription's override as it was at the first publish, which an
# admin may have changed since (a retry would otherwise be a 409 for ever), and the published
# type itself is not stored. A key reused with another payload is still a conflict.
SAME_PUBLISH = enq.ReplayRule(lambda existing, job: same_json(existing.payload, job.payload), "payload")


def _subscription(record: SubscriptionRecord) -> Subscription:
    return Subscription(record.topic, record.queue, record.type, record.created_at)


def topics_of(subs: Sequence[Subscription]) -> list[dict[str, Any]]:
    """Subscriptions (ordered by topic) grouped into topics, as the API shows them."""
    grouped: dict[str, list[dict[str, Any]]] = {}  # in first-seen order
    for s in subs:
        grouped.setdefault(s.topic, []).append(s.public())
    return [{"name": topic, "subscriptions": group} for topic, group in grouped.items()]


async def subscribe(ctx: Context, topic: str, queue: str, type_: str | None) -> tuple[Subscription, bool]:
    """Create or replace; True when created. The queue is created with the defaults if it
    did not exist: a subscription names it on purpose, as a settings call does, and every
    publish enqueues to it. (A queue that a subscription names cannot be deleted.)"""
    row = None
    for _ in range(3):  # again only if the queue was deleted between its creation and the insert
        await ctx.ensure_queues([queue], fresh=True)
        row = await ctx.db.fetch_one(Q.TopicSubscribe, {"topic": topic, "queue": queue, "type": type_})
        if row is not None:
            break
        ctx.forget_queue(queue)
    if row is None:
        raise NotFound(f"queue {queue!r} was deleted while it was being subscribed")
    record = records.subscription(row)
    return _subscription(record), record.created


async def unsubscribe(ctx: Context, topic: str, queue: str) -> None:
    if await ctx.db.fetch_one(Q.TopicUnsubscribe, {"topic": topic, "queue": queue}) is None:
        raise NotFound(f"queue {queue!r} is not subscribed to topic {topic!r}")


async def list_all(ctx: Context) -> list[Subscription]:
    return [_subscription(records.subscription(r)) for r in await ctx.db.fetch(Q.TopicList)]


async def get(ctx: Context, topic: str) -> list[Subscription]:
    return [_subscription(records.subscription(r))
            for r in await ctx.db.fetch(Q.TopicGet, {"topic": topic})]


async def publish(ctx: Context, topic: str, job: NewJob, allow: Callable[[list[str]], None]) -> Published:
    """Enqueue ``job`` (its ``queue`` ignored) once per subscribed queue, in subscription
    (queue name) order, all or nothing. ``allow`` gets the subscribed queues before anything
    is written and raises to refuse (the API's per-queue access check). A topic without
    subscriptions publishes to no queue: an empty, successful publish, as in SNS."""
    async with ctx.db.transaction() as conn:
        subs = [records.target(r)
                for r in await ctx.db.run(conn, Q.TopicSubscriptionsLock, {"topic": topic})]
        queues = [s.queue for s in subs]
        allow(queues)
        # The foreign key keeps every subscribed queue in existence; this process only
        # learns here that it need not create them.
        ctx.known_queues.update(queues)
        key = job_key(topic, job.idempotency_key) if job.idempotency_key is not None else None
        jobs = [
            dataclasses.replace(job, queue=s.queue, type=s.type or job.type, idempotency_key=key) for s in subs
        ]
        results, created = await enq.insert_many(ctx, conn, jobs, SAME_PUBLISH)
    enq.announce(ctx, created)
    if subs:  # topics with subscriptions only: those an admin made, not any name sent
        counters.topic_published(topic)
    return Published(results)
