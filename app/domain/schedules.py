"""STAND-IN for the cron arithmetic (the real module comes from branch h-cron): the same
names, crude semantics, just enough for the scheduler to run. Drop at merge."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

Misfire = Literal["skip", "run_once"]
MISFIRES: tuple[Misfire, ...] = ("skip", "run_once")

_ALIASES = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
            "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
            "@hourly": "0 * * * *"}


class CronError(ValueError):
    pass


@dataclass(frozen=True)
class CronSpec:
    expr: str


def parse_cron(expr: str) -> CronSpec:
    text = " ".join(expr.split())
    text = _ALIASES.get(text.lower(), text)
    n = len(text.split())
    if n not in (5, 6):
        raise CronError(f"a cron expression has 5 fields (or 6 with seconds first), not {n}")
    try:
        croniter(text, datetime(2026, 1, 1, tzinfo=UTC), second_at_beginning=n == 6).get_next(datetime)
    except Exception as exc:
        raise CronError(f"not a valid cron expression: {exc}") from None
    return CronSpec(text)


def parse_timezone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CronError(f"unknown time zone {name!r} (an IANA name such as Europe/Berlin)") from None


def next_fire_after(spec: CronSpec, tz: ZoneInfo, after: datetime) -> datetime:
    it = croniter(spec.expr, after.astimezone(tz), second_at_beginning=len(spec.expr.split()) == 6)
    value: datetime = it.get_next(datetime)
    return value.astimezone(UTC)


@dataclass(frozen=True)
class Due:
    fire_at: datetime | None
    missed: int
    next_fire_at: datetime


def due(spec: CronSpec, tz: ZoneInfo, next_fire_at: datetime, now: datetime, misfire: Misfire) -> Due:
    times = [next_fire_at]
    nxt = next_fire_after(spec, tz, next_fire_at)
    while nxt <= now:
        times.append(nxt)
        nxt = next_fire_after(spec, tz, nxt)
    if len(times) == 1:
        return Due(times[0], 0, nxt)
    if misfire == "skip":
        return Due(None, len(times), nxt)
    return Due(times[-1], len(times) - 1, nxt)


def fire_key(name: str, fire_at: datetime) -> str:
    return f"schedule:{name}:{fire_at.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"


def first_fire(spec: CronSpec, tz: ZoneInfo, now: datetime) -> datetime:
    return next_fire_after(spec, tz, now)


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)
