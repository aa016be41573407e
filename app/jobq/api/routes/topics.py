"""Fan-out topics, /v1/topics: admins subscribe queues; producers publish one job to every
subscribed queue at once (core/topics.py)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path
from starlette.responses import Response

from jobq.api import render
from jobq.api.access import caller
from jobq.api.deps import context
from jobq.api.document import GUARDED, answers
from jobq.api.schemas import (
    PublishPublic,
    QueueName,
    SubscriptionPublic,
    SubscriptionPut,
    TopicList,
    TopicName,
    TopicPublic,
    TopicPublish,
)
from jobq.core import topics as core
from jobq.core.context import Context
from jobq.domain.access import Principal
from jobq.domain.errors import Forbidden

router = APIRouter(prefix="/v1/topics", tags=["topics"])

# Through Annotated[..., Path()], as a queue's name is, so that the pattern holds.
Topic = Annotated[TopicName, Path()]
Queue = Annotated[QueueName, Path()]

_PUT_EXAMPLES: dict[str, Any] = {
    "same-type": {"summary": "Jobs keep the published type", "value": {}},
    "type-override": {"summary": "This queue's jobs get their own type", "value": {"type": "invoice.create"}},
}
_PUBLISH_NOTES = {
    403: "`forbidden`: a producer token, or an admin token, whose queue pattern misses a "
    "subscribed queue (not named: it may be another tenant's); nothing enqueued",
    409: "`idempotency_conflict`: the key names jobs of another payload",
    429: "`queue_full`: a subscribed queue is at its max_depth; nothing enqueued. `Retry-After` in whole seconds",
}


def _covers_all(who: Principal, queues: list[str]) -> None:
    """403 unless the token covers every subscribed queue. The detail names none of them: a
    tenant's producer would otherwise learn the queue names of whoever else subscribed."""
    if not who.queues.is_all and not all(who.sees(q) for q in queues):
        raise Forbidden("a queue subscribed to this topic is outside this token's queues")


@router.get("", response_model=TopicList, summary="List topics and their subscriptions", responses=answers(*GUARDED))
async def list_topics(ctx: Context = Depends(context)) -> Response:
    """Every topic with at least one subscription, by name; a topic exists through its
    subscriptions only."""
    subs = await core.list_all(ctx)
    return render.json_response({"topics": core.topics_of(subs)})


@router.get("/{topic}", response_model=TopicPublic, summary="Read a topic", responses=answers(*GUARDED, 422))
async def get_topic(topic: Topic, ctx: Context = Depends(context)) -> Response:
    """A topic nobody subscribed to is no error: it has no subscriptions, and publishing to
    it enqueues nothing."""
    return render.json_response({"name": topic, "subscriptions": [s.public() for s in await core.get(ctx, topic)]})


@router.put(
    "/{topic}/subscriptions/{queue}",
    response_model=SubscriptionPublic,
    status_code=201,
    summary="Subscribe a queue to a topic",
    responses={
        200: {"model": SubscriptionPublic, "description": "replaced (the type override is the new one)"},
        201: {"description": "created"},
        **answers(*GUARDED, 413, 422),
    },
)
async def subscribe_queue(
    topic: Topic,
    queue: Queue,
    body: Annotated[SubscriptionPut | None, Body(openapi_examples=_PUT_EXAMPLES)] = None,
    ctx: Context = Depends(context),
) -> Response:
    """From now on every publish to the topic enqueues one job in the queue, of the
    published type or of `type` when given. The body may be empty. A queue that does not
    exist yet is created with the defaults. Replacing changes only the type override."""
    type_ = body.type if body is not None else None
    sub, created = await core.subscribe(ctx, topic, queue, type_)
    out = {"topic": sub.topic, **sub.public()}
    return render.json_response(out, 201 if created else 200)


@router.delete(
    "/{topic}/subscriptions/{queue}",
    status_code=204,
    response_class=Response,
    summary="Unsubscribe a queue from a topic",
    responses={
        204: {"description": "unsubscribed"},
        **answers(*GUARDED, 422, notes={404: "`not_found`: the queue is not subscribed to the topic"}),
    },
)
async def unsubscribe_queue(topic: Topic, queue: Queue, ctx: Context = Depends(context)) -> Response:
    """Jobs published before stay in the queue. A publish in progress finishes first, with
    the queue included: no publish reaches only part of its subscribers."""
    await core.unsubscribe(ctx, topic, queue)
    return Response(status_code=204)


@router.post(
    "/{topic}/publish",
    response_model=PublishPublic,
    status_code=201,
    summary="Publish: one job in every subscribed queue, all or nothing",
    responses={
        200: {
            "model": PublishPublic,
            "description": "nothing new: an idempotent replay (the jobs of "
            "the first publish), or a topic without subscriptions",
        },
        **answers(*GUARDED, 413, 422, 429, notes=_PUBLISH_NOTES),
    },
)
async def publish_topic(
    topic: Topic, body: TopicPublish, ctx: Context = Depends(context), who: Principal = Depends(caller)
) -> Response:
    """One transaction: a job per subscribed queue, each an ordinary job of that queue (its
    max_attempts, backoff and dead-letter handling), typed by the subscription's override
    when it has one. `201` when it enqueued anything. A topic without subscriptions
    enqueues nothing and answers `200` with `jobs: []`, as SNS does for a topic nobody
    subscribed to. The caller's token must cover every subscribed queue (else `403`, and
    nothing is enqueued); a subscribed queue at its `max_depth` refuses the whole publish
    (`429`). With `idempotency_key` each job's key is `topic:{topic}/{key}`: a repeated
    publish with the same payload answers `200` with the same jobs and enqueues nothing,
    even if a subscription's type override changed since (but a queue subscribed since, or
    whose job retention deleted, gets a new job, and the answer is then `201`)."""
    out = await core.publish(ctx, topic, body.to_domain(), lambda queues: _covers_all(who, queues))
    status = 201 if out.created else 200
    return render.json_response({"topic": topic, "jobs": [render.job(e.job) for e in out.jobs]}, status)
