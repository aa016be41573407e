"""``jobq topics``: fan-out topics over the HTTP API (the SDK). Subscriptions are an admin's;
``publish`` a producer's whose token covers every subscribed queue.

Tables for people (rich), ``--json`` for scripts, as the other commands (``jobq.cli_ops``).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from jobq.cli_format import age, fitted_table, jobs_table
from jobq.cli_ops import (
    DEFAULT_URL,
    AsJson,
    Token,
    Url,
    _client,
    _json_object,
    _print_json,
    _refuse_group_options,
    console,
)


def _topics_table(topics: list[Any], width: int) -> Table:
    """topic, queue, type override, subscribed (age): within ``width`` columns, like the
    other listings; only the free-text names are shortened."""
    rows = [[t.name, s.queue, s.type or "", age(s.created_at)] for t in topics for s in t.subscriptions]
    return fitted_table(
        ["topic", "queue", "type override", "subscribed"],
        rows,
        width,
        shrink={"topic": 8, "queue": 8, "type override": 10},
        right=frozenset({"subscribed"}),
    )


def register(app: typer.Typer) -> None:
    topics_app = typer.Typer(
        help="Fan-out topics: one publish, one job in every subscribed queue.", invoke_without_command=True
    )
    app.add_typer(topics_app, name="topics")

    @topics_app.callback()
    def topics_default(
        ctx: typer.Context, url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False
    ) -> None:
        """List topics (the same as `jobq topics list`)."""
        _refuse_group_options(ctx)
        if ctx.invoked_subcommand is None:
            topics_list(url, token, as_json)

    @topics_app.command("list")
    def topics_list(url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False) -> None:
        """List every topic with its subscribed queues (admin)."""
        with _client(url, token) as c:
            found = c.list_topics()
        _print_json({"topics": found}) if as_json else console.print(_topics_table(found, console.width))

    @topics_app.command("subscribe")
    def topics_subscribe(
        topic: str,
        queue: str,
        type: Annotated[  # noqa: A002 - the API's name
            str | None, typer.Option(help="the job type this queue gets in place of the published one")
        ] = None,
        url: Url = DEFAULT_URL,
        token: Token = None,
        as_json: AsJson = False,
    ) -> None:
        """Subscribe QUEUE to TOPIC, or replace its type override (admin)."""
        with _client(url, token) as c:
            sub = c.subscribe(topic, queue, type)
        if as_json:
            _print_json(sub)
        else:
            override = f" as {sub.type}" if sub.type else ""
            console.print(f"{sub.queue} subscribed to {sub.topic}{override}", highlight=False)

    @topics_app.command("unsubscribe")
    def topics_unsubscribe(
        topic: str, queue: str, url: Url = DEFAULT_URL, token: Token = None, as_json: AsJson = False
    ) -> None:
        """Unsubscribe QUEUE from TOPIC; jobs published before stay (admin)."""
        with _client(url, token) as c:
            c.unsubscribe(topic, queue)
        if as_json:
            _print_json({"topic": topic, "unsubscribed": queue})
        else:
            console.print(f"{queue} unsubscribed from {topic}", highlight=False)

    @topics_app.command("publish")
    def topics_publish(
        topic: str,
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
        body = _json_object(payload)
        with _client(url, token) as c:
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
            _print_json({"topic": topic, "jobs": jobs})
        elif jobs:
            console.print(jobs_table(jobs, console.width))
        else:
            console.print(f"{topic} has no subscriptions: nothing enqueued", highlight=False)
