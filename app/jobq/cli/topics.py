"""``jobq topics``: fan-out topics over the HTTP API (the SDK); alone it lists them.
Subscriptions are an admin's; ``publish`` a producer's whose token covers every subscribed
queue."""

from __future__ import annotations

from typing import Annotated

import typer

from jobq.cli.help_format import CommandGroup
from jobq.cli.output import AsJson, Wide, print_json, print_table, show, table_width
from jobq.cli.remote import DEFAULT_URL, Token, Url, connect, json_object, refuse_group_options
from jobq.cli.views import jobs_table, topics_table

app = CommandGroup(help="Fan-out topics: one publish, one job in every subscribed queue.",
                   invoke_without_command=True)

Topic = Annotated[str, typer.Argument(help="the topic's name")]
Queue = Annotated[str, typer.Argument(help="the subscribed queue")]


@app.callback()
def topics_default(ctx: typer.Context, url: Url = DEFAULT_URL, token: Token = None,
                   as_json: AsJson = False, wide: Wide = False) -> None:
    """List topics (the same as `jobq topics list`)."""
    refuse_group_options(ctx)
    if ctx.invoked_subcommand is None:
        topics_list(ctx, url, token, as_json, wide)


@app.command("list")
def topics_list(ctx: typer.Context, url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False,
                wide: Wide = False) -> None:
    """List every topic with its subscribed queues (admin)."""
    with connect(ctx) as c:
        found = c.list_topics()
    if as_json:
        print_json({"topics": found})
        return
    width = table_width(wide)
    print_table(topics_table(found, width), width)


@app.command("subscribe")
def topics_subscribe(
    ctx: typer.Context,
    topic: Topic,
    queue: Queue,
    type: Annotated[  # noqa: A002 - the API's name
        str | None, typer.Option(help="the job type this queue gets in place of the published one")
    ] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Subscribe QUEUE to TOPIC, or replace its type override (admin)."""
    with connect(ctx) as c:
        sub = c.subscribe(topic, queue, type)
    if as_json:
        print_json(sub)
    else:
        override = f" as {sub.type}" if sub.type else ""
        show(f"{sub.queue} subscribed to {sub.topic}{override}", highlight=False)


@app.command("unsubscribe")
def topics_unsubscribe(ctx: typer.Context, topic: Topic, queue: Queue, url: Url = DEFAULT_URL,
                       token: Token = None, as_json: AsJson = False) -> None:
    """Unsubscribe QUEUE from TOPIC; jobs published before stay (admin)."""
    with connect(ctx) as c:
        c.unsubscribe(topic, queue)
    if as_json:
        print_json({"topic": topic, "unsubscribed": queue})
    else:
        show(f"{queue} unsubscribed from {topic}", highlight=False)


@app.command("publish")
def topics_publish(
    ctx: typer.Context,
    topic: Topic,
    type: Annotated[str, typer.Argument(help="the job type")],  # noqa: A002
    payload: Annotated[str, typer.Option(help="JSON object")] = "{}",
    priority: Annotated[int | None, typer.Option()] = None,
    delay_ms: Annotated[int | None, typer.Option(min=0)] = None,
    max_attempts: Annotated[int | None, typer.Option(min=1)] = None,
    idempotency_key: Annotated[str | None, typer.Option()] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Enqueue one job in every queue subscribed to TOPIC, all or none."""
    body = json_object(ctx, payload)
    with connect(ctx) as c:
        jobs = c.publish(
            topic,
            type,
            body,
            priority=priority,
            delay=None if delay_ms is None else delay_ms / 1000,
            max_attempts=max_attempts,
            idempotency_key=idempotency_key,
        )
    if as_json:
        print_json({"topic": topic, "jobs": jobs})
    elif jobs:
        width = table_width(wide=False)
        print_table(jobs_table(jobs, width), width)
    else:
        show(f"{topic} has no subscriptions: nothing enqueued", highlight=False)
