"""``jobq tokens create|list|revoke``: access tokens, written straight to the database.

Like ``jobq migrate`` these work on the database ``JOBQ_DATABASE_URL`` names (or the
embedded one under ``JOBQ_DATA_DIR``, shared with a ``jobq serve`` already running on it),
so the first token needs no running service and no other token. Each applies pending
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
import json
import sys
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    from jobq.core.tokens import TokenInfo
    from jobq.store.db import Database

T = TypeVar("T")

ROLES = ("producer", "worker", "admin")
MAX_NAME_CHARS = 255  # as POST /v1/tokens (jobq.api.schemas.TokenCreate)

AsJson = Annotated[bool, typer.Option("--json", help="print JSON for scripts")]

tokens_app = typer.Typer(
    help="Access tokens, in the database (JOBQ_DATABASE_URL, or the embedded one): no running "
         "service or other token needed.",
    no_args_is_help=True)


def _fail(message: str, code: int) -> NoReturn:
    # The same one line as every other command (a JSON object with --json).
    from jobq.cli_ops import _fail as fail

    fail(message, code)


def _when(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def _short(value: datetime | None) -> str:
    return "" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def _public(info: TokenInfo) -> dict[str, Any]:
    """A token as ``GET /v1/tokens`` lists it, its times as that JSON writes them."""
    return info.public() | {"created_at": _when(info.created_at), "revoked_at": _when(info.revoked_at)}


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")


def _on_database(action: Callable[[Database], Awaitable[T]]) -> T:
    """Migrate the database, then run ``action`` on it (the embedded one started or
    attached to for the time of the call)."""
    from jobq import cli
    from jobq.domain.errors import JobqError
    from jobq.store.db import Database
    from jobq.store.migrate import migrate

    # No logging set up: the migration's INFO lines would only bury the one line that
    # matters (warnings still reach stderr through logging's last resort).
    settings = cli._settings()
    with ExitStack() as stack:
        url = cli._database(stack, settings)
        try:
            migrate(url)
        except Exception as exc:  # sqlalchemy's OperationalError and kin: no traceback
            _fail(f"cannot migrate the database: {str(exc).splitlines()[0]}", 1)

        async def run() -> T:
            db = Database(url, pool_size=1, timeout_s=settings.db_timeout_s,
                          retry_after_s=settings.retry_after_s)
            await db.open(wait=True)
            try:
                return await action(db)
            finally:
                await db.close()

        try:
            return asyncio.run(run())
        except JobqError as exc:  # NotFound, Unavailable: the domain's one-line details
            _fail(exc.detail, 1)
        except Exception as exc:  # the pool could not open: the database went away
            _fail(f"cannot use the database: {str(exc).splitlines()[0] if str(exc) else exc!r}", 1)


@tokens_app.command("create")
def create(
    role: Annotated[str, typer.Option(help="producer, worker or admin")],
    queues: Annotated[str, typer.Option(
        help="comma-separated shell-style globs on queue names ('tenant-a.*,mail')")] = "*",
    name: Annotated[str | None, typer.Option(help="a label for people: who or what uses it")] = None,
    as_json: AsJson = False,
) -> None:
    """Create a token and print it, once: only its hash is stored.

    Plain output is the token alone on stdout (TOKEN=$(jobq tokens create --role worker));
    its id, role and queues go to stderr."""
    from jobq import cli

    cli._need_server("tokens create")
    from jobq.core import tokens as core
    from jobq.domain.access import QueuePattern, Role

    # Checked before the database is touched: a bad argument writes nothing.
    if role not in ROLES:
        _fail(f"--role must be one of {', '.join(ROLES)}, not {role!r}", 2)
    try:
        pattern = QueuePattern(queues)
    except ValueError as exc:
        _fail(f"--queues {queues!r}: {exc}", 2)
    if name is not None and not 1 <= len(name) <= MAX_NAME_CHARS:
        _fail(f"--name must be 1 to {MAX_NAME_CHARS} characters", 2)

    info, token = _on_database(lambda db: core.create(db, Role(role), pattern.text, name))
    if as_json:
        _print_json(_public(info) | {"token": token})
        return
    label = f" {info.name!r}" if info.name else ""
    typer.echo(f"jobq: created {info.role.value} token {info.id}{label} for queues "
               f"{info.queues!r}; it is printed once, below, and cannot be shown again", err=True)
    typer.echo(token)


@tokens_app.command("list")
def list_(as_json: AsJson = False) -> None:
    """List every token ever created, newest first, revoked ones included (never a secret)."""
    from jobq import cli

    cli._need_server("tokens list")
    from jobq.core import tokens as core

    found = _on_database(core.list_all)
    if as_json:
        _print_json({"tokens": [_public(i) for i in found]})
        return
    from rich.console import Console

    from jobq.cli_format import fitted_table

    # The plain 80-column table of the other listings. Ids and times are copied and read
    # whole: only the free-text name and queue pattern are shortened (with an ellipsis);
    # `--json` has them whole.
    rows = [[i.id, i.name or "", i.role.value, i.queues, _short(i.created_at), _short(i.revoked_at)]
            for i in found]
    console = Console()
    console.print(fitted_table(["id", "name", "role", "queues", "created (UTC)", "revoked (UTC)"], rows,
                               console.width, shrink={"name": 6, "queues": 6}))


@tokens_app.command("revoke")
def revoke(
    token_id: Annotated[str, typer.Argument(metavar="ID", help="the token's id (jobq tokens list)")],
    as_json: AsJson = False,
) -> None:
    """Revoke a token: every replica refuses it within a second. Revoking twice is harmless."""
    from jobq import cli

    cli._need_server("tokens revoke")
    from jobq.core import tokens as core

    info = _on_database(lambda db: core.revoke(db, token_id))
    if as_json:
        _print_json(_public(info))
    else:
        typer.echo(f"revoked token {info.id} at {_when(info.revoked_at)}")


def register(app: typer.Typer) -> None:
    app.add_typer(tokens_app, name="tokens")
