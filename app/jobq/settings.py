"""The one settings object, read from ``JOBQ_*`` environment variables and validated at start."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from jobq.descriptors import default_max_long_polls
from jobq.domain.access import (
    ADMIN_TOKEN_ALPHABET,
    MIN_ADMIN_TOKEN_LENGTH,
    QueuePattern,
    token_id_of,
)

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
DEFAULT_POOL_SIZE = 10
DEFAULT_POOL_MIN_SIZE = 1
DEFAULT_POOL_IDLE_S = 30.0
# Connections each service process holds besides its pool: LISTEN and the duties' lock; and
# one more, for a while, in the leader's upkeep (VACUUM, history partitions).
SESSION_CONNECTIONS = 3
DEFAULT_DB_TIMEOUT_S = 5.0
DEFAULT_REAP_INTERVAL_S = 0.5
DEFAULT_RETRY_AFTER_S = 1
DEFAULT_HEADER_TIMEOUT_S = 10.0
# 500 queues' gauges are about 250 KB of /metrics (~9 series a queue): a scrape well under
# Prometheus's defaults, whatever the number of queues (the rest is one `_other` bucket).
DEFAULT_METRICS_QUEUES = 500


class Settings(BaseSettings):
    """Service configuration. Every field is ``JOBQ_<NAME>`` in the environment."""

    # hide_input_in_errors: a refused JOBQ_ADMIN_TOKEN (or a URL with a password) is not
    # echoed into logs.
    model_config = SettingsConfigDict(env_prefix="JOBQ_", extra="ignore", hide_input_in_errors=True)

    database_url: str | None = Field(
        default=None,
        description="postgresql://… of the database; unset starts an embedded server under data_dir",
    )
    direct_database_url: str | None = Field(
        default=None,
        description="postgresql://… of a direct connection (or one through a session pooler) "
        "for what needs a server session of its own: LISTEN, the duties' lock, migrations, the "
        "leader's upkeep; unset: database_url. Required when database_url is a transaction pooler",
    )
    database_pooling: Literal["auto", "session", "transaction"] = Field(
        default="auto",
        description="what the pool's connections reach: `session` (PostgreSQL itself, or a "
        "pooler that gives each connection one server session), `transaction` (pgbouncer's "
        "pool_mode=transaction: no named prepared statements, no session settings), or `auto` "
        "(probed at start)",
    )
    prepared_statements: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="prepare the pool's statements on the server (planned once per "
        "connection): `auto` is on unless database_pooling is transaction; `on` behind a "
        "pooler that carries protocol-level prepared statements (pgbouncer 1.21+ with "
        "max_prepared_statements set)",
    )
    data_dir: Path = Field(default=Path(".jobq"), description="home of the embedded PostgreSQL")
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    pool_size: int = Field(default=DEFAULT_POOL_SIZE, ge=1, le=500,
                           description="most pooled connections of one service process")
    pool_min_size: int = Field(default=DEFAULT_POOL_MIN_SIZE, ge=0, le=500,
                               description="pooled connections kept open while idle")
    pool_idle_s: float = Field(
        default=DEFAULT_POOL_IDLE_S,
        ge=1,
        le=3600,
        description="pooled connections above pool_min_size that stay idle are closed, the "
        "last of them about this long after the load that opened them ended",
    )
    db_timeout_s: float = Field(
        default=DEFAULT_DB_TIMEOUT_S,
        gt=0,
        le=9,
        description="longest wait for a connection or a statement before answering 503; the "
        "contract wants every answer within 10 s",
    )
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, ge=1024)
    reap_interval_s: float = Field(
        default=DEFAULT_REAP_INTERVAL_S,
        gt=0,
        le=1,
        description="how often expired leases are processed; the contract allows at most 1 s",
    )
    retry_after_s: int = Field(default=DEFAULT_RETRY_AFTER_S, ge=1, description="Retry-After on 429/503")
    header_timeout_s: float = Field(
        default=DEFAULT_HEADER_TIMEOUT_S,
        gt=0,
        le=300,
        description="a connection that has not sent a whole request line and headers this long "
        "after opening (or after its request's first byte) is closed (408 if part came)",
    )
    metrics_queues: int = Field(
        default=DEFAULT_METRICS_QUEUES,
        ge=0,
        le=100_000,
        description="/metrics gives per-queue series to at most this many queues (those with "
        "the most waiting jobs, ties by name); the others are summed in queue=\"_other\"",
    )
    metrics_queue_pattern: str = Field(
        default="*",
        description="only queues matching this pattern (globs, comma-separated, as a token's "
        "queues) get per-queue series in /metrics; the others are summed in queue=\"_other\"",
    )
    max_long_polls: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="most claims with wait_ms > 0 one service process holds waiting at once; "
        "past it a long-poll is answered at once, with the jobs it finds or 503 "
        "too_many_long_polls and Retry-After. Unset: derived from the descriptor limit (raised "
        "to the hard limit at start) as (limit - pool_size - 3 - 64) // 2: one descriptor per "
        "pooled connection, 3 for the LISTEN, leader and upkeep connections, 64 for the "
        "process's own, and half of the rest kept for every other request",
    )
    history_partition_s: int = Field(
        default=86_400,
        ge=1,
        le=31 * 86_400,
        description="width of one partition of the finished jobs' history, in seconds: a "
        "finished job is deleted when its partition's range has passed, up to this long after "
        "its retention; fewer, wider partitions make lookups by id cheaper (README, Operating)",
    )
    admin_token: str | None = None
    log_format: Literal["json", "text"] = "text"
    log_level: str = "INFO"

    @field_validator("database_url", "direct_database_url")
    @classmethod
    def _check_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or value == "":
            return None
        name = f"JOBQ_{str(info.field_name).upper()}"
        if not value.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
            raise ValueError(f"{name} must start with postgresql://")
        check_libpq_url(value, name)
        return value

    @field_validator("database_pooling", "prepared_statements", mode="before")
    @classmethod
    def _lower_words(cls, value: object) -> object:
        # Unset and empty mean the default (compose passes ""); words in any case.
        if value == "":
            return "auto"
        return value.lower() if isinstance(value, str) else value

    @field_validator("metrics_queue_pattern")
    @classmethod
    def _check_metrics_pattern(cls, value: str) -> str:
        try:
            return QueuePattern(value).text
        except ValueError as exc:
            raise ValueError(f"JOBQ_METRICS_QUEUE_PATTERN: {exc}") from None

    @field_validator("max_long_polls", mode="before")
    @classmethod
    def _check_max_long_polls(cls, value: object) -> object:
        # Unset and empty both mean "derived from the descriptor limit" (compose passes "").
        return None if value == "" else value

    @field_validator("admin_token")
    @classmethod
    def _check_admin_token(cls, value: str | None) -> str | None:
        # Unset and empty both mean "no bootstrap token" (compose passes "" for an unset one).
        if not value:
            return None
        # A short token can be guessed, and one with spaces or control characters cannot be
        # sent in an Authorization header: say so at start, not as a 401 on every call.
        if len(value) < MIN_ADMIN_TOKEN_LENGTH:
            raise ValueError(f"JOBQ_ADMIN_TOKEN must be at least {MIN_ADMIN_TOKEN_LENGTH} "
                             f"characters long (it has {len(value)}); use a long random secret")
        if not ADMIN_TOKEN_ALPHABET.match(value):
            raise ValueError("JOBQ_ADMIN_TOKEN must be printable ASCII without spaces")
        # One of the form of a database token would be looked up as one, and never match.
        if token_id_of(value) is not None:
            raise ValueError("JOBQ_ADMIN_TOKEN must not look like a token of `jobq tokens create`")
        return value

    @model_validator(mode="after")
    def _check_pool(self) -> Settings:
        if self.pool_min_size > self.pool_size:
            raise ValueError(f"JOBQ_POOL_MIN_SIZE ({self.pool_min_size}) must not exceed "
                             f"JOBQ_POOL_SIZE ({self.pool_size})")
        return self

    @model_validator(mode="after")
    def _check_log_level(self) -> Settings:
        if self.log_level.upper() not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ValueError("JOBQ_LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR")
        self.log_level = self.log_level.upper()
        return self

    def long_poll_cap(self, descriptor_limit: int) -> int:
        """``max_long_polls``, or the default derived from ``descriptor_limit``."""
        if self.max_long_polls is not None:
            return self.max_long_polls
        return default_max_long_polls(descriptor_limit, self.pool_size)

    @property
    def libpq_url(self) -> str:
        """The URL in the form psycopg takes (no SQLAlchemy driver suffix)."""
        if self.database_url is None:
            raise RuntimeError("database_url is not set")
        return libpq_form(self.database_url)

    def direct_url(self, pooled_url: str) -> str:
        """The URL of session-bound connections: JOBQ_DIRECT_DATABASE_URL, or ``pooled_url``
        (the pool's: JOBQ_DATABASE_URL or the embedded server's)."""
        return libpq_form(self.direct_database_url) if self.direct_database_url else pooled_url

    def prepare(self, pooling: str) -> bool:
        """Whether the pool prepares statements, given what it reaches (``pooling``)."""
        if self.prepared_statements != "auto":
            return self.prepared_statements == "on"
        return pooling != "transaction"

    def connection_budget(self) -> str:
        """What one process will use, for the start log and the README's formula."""
        return (f"pool of {self.pool_min_size} to {self.pool_size} (JOBQ_POOL_MIN_SIZE, "
                f"JOBQ_POOL_SIZE; idle ones above the minimum closed within ~{self.pool_idle_s:g} s) "
                f"+ {SESSION_CONNECTIONS} session connections (LISTEN, duties lock, leader's "
                f"upkeep): at most {self.pool_size + SESSION_CONNECTIONS} per process; keep "
                f"processes x (JOBQ_POOL_SIZE + {SESSION_CONNECTIONS}) within the role's or "
                "server's connection limit")


def libpq_form(url: str) -> str:
    """``url`` as libpq reads it: without SQLAlchemy's driver suffix."""
    for prefix in ("postgresql+psycopg://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql://" + url[len(prefix):]
    return url


def check_libpq_url(url: str, name: str = "JOBQ_DATABASE_URL") -> None:
    """Refuse, at start and in one line, a URL libpq would refuse only when connecting (or
    SQLAlchemy with a traceback). A multi-host URL (``postgresql://h1:p1,h2:p2/db?
    target_session_attrs=read-write``) is fine: libpq tries the hosts in turn. The message
    never repeats the URL, which may hold a password."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    for prefix in ("postgresql+psycopg://", "postgres://"):
        if url.startswith(prefix):
            url = "postgresql://" + url[len(prefix):]
    try:
        params = conninfo_to_dict(url)
    except ProgrammingError as exc:
        # libpq's reason names the bad part ("invalid URI query parameter: "x""); a
        # password in it is hidden.
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else "not a valid URL"
        password = _password_in(url)
        if password:
            reason = reason.replace(password, "***")
        raise ValueError(f"{name} is not a valid PostgreSQL URL: {reason}") from None
    hosts = str(params.get("host") or "").split(",")
    ports = str(params.get("port") or "").split(",")
    for port in ports:
        if port and not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
            raise ValueError(f"{name}: port {port[:20]!r} is not a number from 1 to 65535")
    if len(ports) > 1 and len(ports) != len(hosts):
        raise ValueError(f"{name} names {len(hosts)} hosts and {len(ports)} ports: "
                         "give one port for all, or one per host (h1:p1,h2:p2)")
    attrs = params.get("target_session_attrs")
    if attrs is not None and attrs not in _SESSION_ATTRS:
        raise ValueError(f"{name}: target_session_attrs must be one of "
                         f"{', '.join(_SESSION_ATTRS)}")


_SESSION_ATTRS = ("any", "read-write", "read-only", "primary", "standby", "prefer-standby")


def _password_in(url: str) -> str | None:
    """The password in the URL's user part, as written (percent-encoded or not)."""
    netloc = url.partition("://")[2].partition("/")[0]
    userinfo, at, _ = netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return None
    return userinfo.partition(":")[2] or None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
