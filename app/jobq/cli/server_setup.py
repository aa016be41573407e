"""What the commands that run on the server's side share (``serve``, ``migrate``, ``bench``,
``openapi``, ``tokens``): the server extra's check, the settings from JOBQ_* variables, the
database (JOBQ_DATABASE_URL or the embedded one) and its migrations, each failure one line."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar

import typer

if TYPE_CHECKING:  # the server extra's: imported only by the commands that need it
    from jobq.settings import Settings

T = TypeVar("T")

# What `pip install 'jobq[server]'` adds; the base install is the SDK and the client commands.
SERVER_MODULES = ("fastapi", "uvicorn", "sqlalchemy", "alembic", "psycopg", "pydantic_settings")


def need_server(command: str) -> None:
    """Exit with one line when the service's dependencies are not installed."""
    import importlib.util

    missing = [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        typer.echo(f"jobq {command} needs the server extra (missing: {', '.join(missing)}): "
                   "pip install 'jobq[server]'", err=True)
        raise typer.Exit(2)


def load_settings() -> Settings:
    """The settings, or one line per bad JOBQ_* variable and exit 2."""
    from pydantic import ValidationError

    from jobq.settings import Settings

    try:
        return Settings()
    except ValidationError as exc:
        for err in exc.errors():
            name = "JOBQ_" + "_".join(str(p) for p in err["loc"]).upper()
            # "Value error, " is pydantic's prefix for a validator's ValueError: noise here;
            # and a message that names its variable already needs no prefix.
            msg = err["msg"].removeprefix("Value error, ")
            typer.echo(f"jobq: {msg}" if msg.startswith(name) else f"jobq: {name}: {msg}", err=True)
        raise typer.Exit(2) from None


def setup_logging(settings: Settings) -> None:
    from jobq.logs import configure

    configure(settings.log_format, settings.log_level)


def database(stack: ExitStack, settings: Settings, *, create: bool = False,
             refuse: Callable[[str], NoReturn] | None = None) -> str:
    """The libpq URL to use: JOBQ_DATABASE_URL, or an embedded server started for us (and
    stopped when ``stack`` closes).

    Only ``jobq serve`` passes ``create``: the other commands (tokens, migrate) attach to an
    embedded database that exists (starting its server if none runs, as serve would) and
    otherwise ``refuse`` (one line, exit 2 by default) naming JOBQ_DATABASE_URL and the
    directory looked in. Making a new one there would cost seconds of initdb and leave a
    token or a schema in a database no service uses, without a word."""
    if settings.database_url:
        return settings.libpq_url
    from jobq.embedded import EmbeddedPostgres, EmbeddedUnavailable

    pgdata = settings.data_dir / "pgdata"
    if not create and not has_embedded_database(pgdata):
        (refuse or _refuse)(
            f"no database: JOBQ_DATABASE_URL is not set and there is no embedded database in "
            f"{pgdata.resolve()} (JOBQ_DATA_DIR={settings.data_dir}); run this where `jobq serve` "
            "runs (it creates the embedded one), or set JOBQ_DATABASE_URL")
    try:
        server = EmbeddedPostgres(pgdata)
        server.start()
    except EmbeddedUnavailable as exc:
        typer.echo(f"jobq: {exc}", err=True)
        raise typer.Exit(2) from None
    stack.callback(server.stop)
    # The URL is for people too: the SQL enqueue (jobq.enqueue in your own transaction) and
    # psql need a connection to this very database.
    typer.echo(f"jobq: embedded PostgreSQL under {settings.data_dir}/ at {server.url} "
               "(set JOBQ_DATABASE_URL to use your own)", err=True)
    return server.url


def has_embedded_database(pgdata: Path) -> bool:
    """Whether initdb has made a cluster in ``pgdata`` (PG_VERSION is among the files it
    writes; an empty or half-made directory does not count)."""
    return (pgdata / "PG_VERSION").is_file()


def _refuse(message: str) -> NoReturn:
    typer.echo(f"jobq: {message}", err=True)
    raise typer.Exit(2)


# Waiting for a free connection slot at start: the first retry after half a second, then
# twice as long each time up to this, each with some jitter so replicas do not knock together.
SLOT_RETRY_FIRST_S = 0.5
SLOT_RETRY_MAX_S = 5.0


def reach(url: str, step: Callable[[], T]) -> T:
    """Run ``step``, which connects to ``url``. A server with no connection slot free (other
    replicas' pools hold them all, for now) is waited for, one line per attempt: their idle
    connections go back within JOBQ_POOL_IDLE_S. A database that cannot be reached is one
    line and exit 1, not a traceback (libpq's reason names each host it tried)."""
    import random
    import time

    import psycopg
    import sqlalchemy.exc

    from jobq.store.sessions import no_free_slot

    attempt = 0
    while True:
        try:
            return step()
        except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError,
                psycopg.OperationalError) as exc:
            reason = " ".join(str(getattr(exc, "orig", None) or exc).split())  # libpq's hint is a 2nd line
            if not no_free_slot(reason):
                typer.echo(f"jobq: cannot reach the database: {where_db(url)}: {reason}; "
                           f"{db_advice(reason)}", err=True)
                raise typer.Exit(1) from None
            attempt += 1
            delay = min(SLOT_RETRY_MAX_S, SLOT_RETRY_FIRST_S * 2 ** (attempt - 1))
            delay *= random.uniform(0.8, 1.0)
            typer.echo(f"jobq: no free connection slot at {where_db(url)} ({reason}); "
                       f"attempt {attempt}, trying again in {delay:.1f} s", err=True)
            time.sleep(delay)


def migrate_database(url: str) -> None:
    """Apply pending migrations (``url``: the session URL, never a transaction pooler's)."""
    from jobq.store.migrate import migrate

    reach(url, lambda: migrate(url))


def pooling_of(settings: Settings, url: str, direct_url: str,
               refuse: Callable[[str], NoReturn] = _refuse, *, say: bool = True) -> str:
    """What the pool's URL reaches (JOBQ_DATABASE_POOLING, probed when ``auto``), after
    checking that what needs a session has one: ``refuse`` (one line, exit 2) when it has
    not. ``say``: one line on stderr when it is a transaction pooler."""
    import asyncio

    from jobq.store.pooling import probe

    pooling = settings.database_pooling
    how = "JOBQ_DATABASE_POOLING"
    if pooling == "auto":
        pooling, how = reach(url, lambda: asyncio.run(probe(url))), "detected"
    if pooling != "transaction":
        return pooling
    if direct_url == url:
        refuse(f"JOBQ_DATABASE_URL goes through a transaction pooler ({how}; such as pgbouncer "
               "with pool_mode = transaction), where LISTEN, the duties' lock and migrations "
               "cannot work: set JOBQ_DIRECT_DATABASE_URL to a direct connection to the same "
               "database")
    if reach(direct_url, lambda: asyncio.run(probe(direct_url))) == "transaction":
        refuse("JOBQ_DIRECT_DATABASE_URL goes through a transaction pooler too: point it at "
               "PostgreSQL itself (or at a session pooler)")
    if say:
        typer.echo(f"jobq: {where_db(url)} is reached through a transaction pooler ({how}): the "
                   "pool prepares no statements and keeps no session settings; LISTEN, the "
                   "duties' lock and migrations use JOBQ_DIRECT_DATABASE_URL", err=True)
    return pooling


def where_db(url: str) -> str:
    """``database 'jobq' on 127.0.0.1:5432`` (every host of a multi-host URL), never the
    password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(url)
    except Exception:  # the URL was checked at start; this is only for the message
        return "the database in JOBQ_DATABASE_URL"
    hosts = str(info.get("host") or "localhost").split(",")
    ports = str(info.get("port") or "5432").split(",")
    ports = ports * len(hosts) if len(ports) == 1 else ports
    where = ", ".join(f"{h}:{p}" for h, p in zip(hosts, ports, strict=False))
    return f"database {info.get('dbname') or info.get('user') or '?'!r} on {where}"


def db_advice(reason: str) -> str:
    """What to do, from libpq's reason."""
    if "does not exist" in reason:
        return "create it (createdb) or fix JOBQ_DATABASE_URL"
    if "authentication failed" in reason or "password" in reason:
        return "check the user and password in JOBQ_DATABASE_URL"
    if "resolve" in reason:
        return "check the host name in JOBQ_DATABASE_URL"
    return "start PostgreSQL there (or check the firewall), or fix JOBQ_DATABASE_URL"
