"""``jobq tokens create|list|revoke``: access tokens, written straight to the database.

Like ``jobq migrate`` these work on the database ``JOBQ_DATABASE_URL`` names (or the
embedded one under ``JOBQ_DATA_DIR``, shared with a ``jobq serve`` already running on it),
so the first token needs no running service and no other token. They never create the
embedded database: without one there, and without ``JOBQ_DATABASE_URL``, they exit 2 with
one line saying where they looked (only ``jobq serve`` makes it). Each applies pending
migrations first: the tokens table may be newer than the database. A running service sees
a new or revoked token within a second (``jobq.core.tokens.REFRESH_S``).

Output: ``create`` prints the token alone on stdout, so ``TOKEN=$(jobq tokens create
--role worker)`` captures exactly it; what it is (id, role, queues) goes to stderr.
``--json`` prints the same object as ``POST /v1/tokens`` (and ``list``, ``revoke`` those of
``GET /v1/tokens`` and ``DELETE /v1/tokens/{id}``). Errors are one line on stderr: exit 2
for a bad argument (nothing is written), 1 for an unknown id or an unreachable database.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from jobq.cli.help_format import CommandGroup, print_help_and_exit
from jobq.cli.output import AsJson, Wide, fail, print_json, print_table, table_width
from jobq.cli.server_setup import database, load_settings, need_server, pooling_of
from jobq.cli.views import tokens_table

if TYPE_CHECKING:
    from jobq.core.tokens import TokenInfo
    from jobq.domain.rates import Bucket
    from jobq.store.db import Database

T = TypeVar("T")

ROLES = ("producer", "worker", "admin")
MAX_NAME_CHARS = 255  # as POST /v1/tokens (jobq.api.schemas.TokenCreate)

app = CommandGroup(
    help="Access tokens, in the database (JOBQ_DATABASE_URL, or the embedded one): no running "
         "service or other token needed.",
    invoke_without_command=True)


@app.callback()
def tokens_group(ctx: typer.Context) -> None:
    """Access tokens, in the database (JOBQ_DATABASE_URL, or the embedded one): no running
    service or other token needed."""
    if ctx.invoked_subcommand is None:
        print_help_and_exit(ctx)


def _when(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def _public(info: TokenInfo) -> dict[str, Any]:
    """A token as ``GET /v1/tokens`` lists it, its times as that JSON writes them."""
    return info.public() | {"created_at": _when(info.created_at), "revoked_at": _when(info.revoked_at)}


def _on_database(action: Callable[[Database], Awaitable[T]], as_json: bool) -> T:
    """Migrate the database, then run ``action`` on it (the embedded one started or
    attached to for the time of the call)."""
    from jobq.domain.errors import JobqError
    from jobq.store.db import Database
    from jobq.store.migrate import migrate

    # No logging set up: the migration's INFO lines would only bury the one line that
    # matters (warnings still reach stderr through logging's last resort).
    settings = load_settings()
    with ExitStack() as stack:
        pooled_url = database(stack, settings,
                              refuse=lambda message: fail(message, 2, as_json=as_json))
        url = settings.direct_url(pooled_url)
        # Migrations take a session's lock: never through a transaction pooler (one line, in
        # this command's style, naming JOBQ_DIRECT_DATABASE_URL), and this one connection
        # needs none either, so everything here goes to the session URL.
        if settings.database_url:
            pooling_of(settings, pooled_url, url,
                       lambda message: fail(message, 2, as_json=as_json), say=False)
        try:
            migrate(url)
        except Exception as exc:  # sqlalchemy's OperationalError and kin: no traceback
            fail(f"cannot migrate the database: {str(exc).splitlines()[0]}", 1, as_json=as_json)

        async def run() -> T:
            db = Database(url, pool_size=1, timeout_s=settings.db_timeout_s,
                          retry_after_s=settings.retry_after_s, pooling="session")
            await db.open(wait=True)
            try:
                return await action(db)
            finally:
                await db.close()

        try:
            return asyncio.run(run())
        except JobqError as exc:  # NotFound, Unavailable: the domain's one-line details
            fail(exc.detail, 1, as_json=as_json)
        except Exception as exc:  # the pool could not open: the database went away
            fail(f"cannot use the database: {str(exc).splitlines()[0] if str(exc) else exc!r}", 1,
                 as_json=as_json)


@app.command("create")
def create(
    role: Annotated[str, typer.Option(help="producer, worker or admin")],
    queues: Annotated[str, typer.Option(
        help="comma-separated shell-style globs on queue names ('tenant-a.*,mail')")] = "*",
    name: Annotated[str | None, typer.Option(help="a label for people: who or what uses it")] = None,
    enqueue_rate: Annotated[str | None, typer.Option(
        help="the token's own rate of enqueues, N/P[:B]: N jobs per P ms (or 50/1s, 100/1m), "
             "burst B (default N); beyond it 429 token_rate_limited")] = None,
    as_json: AsJson = False,
) -> None:
    """Create a token and print it, once: only its hash is stored.

    Plain output is the token alone on stdout (TOKEN=$(jobq tokens create --role worker));
    its id, role and queues go to stderr."""
    need_server("tokens create")
    from jobq.core import tokens as core
    from jobq.domain.access import QueuePattern, Role

    # Checked before the database is touched: a bad argument writes nothing.
    if role not in ROLES:
        fail(f"--role must be one of {', '.join(ROLES)}, not {role!r}", 2, as_json=as_json)
    try:
        pattern = QueuePattern(queues)
    except ValueError as exc:
        fail(f"--queues {queues!r}: {exc}", 2, as_json=as_json)
    if name is not None and not 1 <= len(name) <= MAX_NAME_CHARS:
        fail(f"--name must be 1 to {MAX_NAME_CHARS} characters", 2, as_json=as_json)
    rate = _rate(enqueue_rate, as_json)

    info, token = _on_database(lambda db: core.create(db, Role(role), pattern.text, name, rate),
                               as_json)
    if as_json:
        print_json(_public(info) | {"token": token})
        return
    label = f" {info.name!r}" if info.name else ""
    limited = "" if info.enqueue_rate is None else f" (enqueue rate {_rate_text(info)})"
    typer.echo(f"jobq: created {info.role.value} token {info.id}{label} for queues "
               f"{info.queues!r}{limited}; it is printed once, below, and cannot be shown again",
               err=True)
    typer.echo(token)


@app.command("list")
def list_(as_json: AsJson = False, wide: Wide = False) -> None:
    """List every token ever created, newest first, revoked ones included (never a secret)."""
    need_server("tokens list")
    from jobq.core import tokens as core

    found = _on_database(core.list_all, as_json)
    if as_json:
        print_json({"tokens": [_public(i) for i in found]})
        return
    width = table_width(wide)
    print_table(tokens_table(found, width), width)


@app.command("revoke")
def revoke(
    token_id: Annotated[str, typer.Argument(metavar="ID", help="the token's id (jobq tokens list)")],
    as_json: AsJson = False,
) -> None:
    """Revoke a token: every replica refuses it within a second. Revoking twice is harmless."""
    need_server("tokens revoke")
    from jobq.core import tokens as core

    info = _on_database(lambda db: core.revoke(db, token_id), as_json)
    if as_json:
        print_json(_public(info))
    else:
        typer.echo(f"revoked token {info.id} at {_when(info.revoked_at)}")


def _rate(text: str | None, as_json: bool) -> Bucket | None:
    """``--enqueue-rate``, checked before the database is touched (exit 2 in words)."""
    from jobq.domain.rates import parse_rate

    if text is None:
        return None
    try:
        return parse_rate(text)
    except ValueError as exc:
        fail(f"--enqueue-rate: {exc}", 2, as_json=as_json)


def _rate_text(info: TokenInfo) -> str:
    r = info.enqueue_rate
    return "none" if r is None else f"{r.jobs} per {r.per_ms} ms, burst {r.burst}"


@app.command("limit")
def limit(
    token_id: Annotated[str, typer.Argument(metavar="ID", help="the token's id (jobq tokens list)")],
    enqueue_rate: Annotated[str | None, typer.Option(
        help="N/P[:B]: N jobs per P ms (or 50/1s), burst B (default N)")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="remove the token's enqueue rate")] = False,
    as_json: AsJson = False,
) -> None:
    """Set (--enqueue-rate) or remove (--clear) a token's own rate of enqueues: every
    replica applies it within a second."""
    need_server("tokens limit")
    from jobq.core import tokens as core

    if (enqueue_rate is None) == (not clear):
        fail("give one of --enqueue-rate N/P[:B] or --clear", 2, as_json=as_json)
    rate = _rate(enqueue_rate, as_json)
    info = _on_database(lambda db: core.set_rate(db, token_id, rate), as_json)
    if as_json:
        print_json(_public(info))
    else:
        typer.echo(f"token {info.id}: enqueue rate {_rate_text(info)}")
