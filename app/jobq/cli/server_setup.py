"""What the commands that run on the server's side share (``serve``, ``migrate``, ``bench``,
``openapi``, ``tokens``): the server extra's check, the settings from JOBQ_* variables, the
database (JOBQ_DATABASE_URL or the embedded one) and its migrations, each failure one line."""

from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:  # the server extra's: imported only by the commands that need it
    from jobq.settings import Settings

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


def database(stack: ExitStack, settings: Settings) -> str:
    """The libpq URL to use: JOBQ_DATABASE_URL, or an embedded server started for us (and
    stopped when ``stack`` closes)."""
    if settings.database_url:
        return settings.libpq_url
    from jobq.embedded import EmbeddedPostgres, EmbeddedUnavailable

    try:
        server = EmbeddedPostgres(settings.data_dir / "pgdata")
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


def migrate_database(url: str) -> None:
    """Apply pending migrations; a database that cannot be reached is one line, not a
    traceback (libpq's reason names each host it tried)."""
    import psycopg
    import sqlalchemy.exc

    from jobq.store.migrate import migrate

    try:
        migrate(url)
    except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError, psycopg.OperationalError) as exc:
        reason = " ".join(str(getattr(exc, "orig", None) or exc).split())  # libpq's hint is a 2nd line
        typer.echo(f"jobq: cannot reach the database: {where_db(url)}: {reason}; "
                   f"{db_advice(reason)}", err=True)
        raise typer.Exit(1) from None


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
