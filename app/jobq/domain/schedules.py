"""Cron arithmetic for recurring schedules: parsing, next fire times in an IANA zone, misfires.

Pure: the standard library and ``zoneinfo`` only. (Not croniter: it fires a daily 02:30 job
twice on a fall-back day; the rules below are easier to state and to test when the wall-clock
logic is ours.)

Expressions
    Five fields ``minute hour day-of-month month day-of-week`` (the contract's form; the
    second is 0), or, as an extension, six with the SECOND first (``*/1 * * * * *`` fires
    every second). Each field takes ``*``, numbers, lists ``a,b``, ranges ``a-b``, steps
    ``*/n``, ``a-b/n`` and ``a/n`` (= ``a-max/n``), month names ``jan``-``dec`` and day names
    ``sun``-``sat``; day-of-week 0 and 7 are both Sunday. Aliases: ``@yearly`` (``@annually``),
    ``@monthly``, ``@weekly``, ``@daily`` (``@midnight``), ``@hourly``.
    Day-of-month and day-of-week combine as in Vixie cron: when BOTH fields are restricted
    (neither starts with ``*``) a day matches if EITHER matches; otherwise both must match
    (so ``0 0 13 * fri`` fires on every 13th and every Friday, ``0 0 */2 * fri`` on odd-day
    Fridays). An expression that can never fire (``0 0 30 2 *``) is rejected.

Wall clock and daylight saving
    A schedule names wall-clock times in its zone. Each matching wall-clock time fires once:
    - Clocks go forward (a gap): a matching wall time that does not exist that day fires at
      the instant the gap ends (02:30 in Berlin on the spring-forward day fires at 03:00
      CEST), so a daily job loses no day. Several matching times in the gap fire once,
      together with a match at the gap's end: ``*/15 * * * *`` fires 01:45 CET then 03:00
      CEST, ``0 * * * *`` fires 01:00 CET then 03:00 CEST.
    - Clocks go back (a fold): a wall time that occurs twice fires on its FIRST occurrence
      only. This holds for every expression, also those with ``*`` in the hour field: during
      the repeated hour ``*/15 * * * *`` does not fire again (Berlin: 02:45 CEST, then 03:00
      CET, 75 real minutes later) and ``0 * * * *`` fires 02:00 CEST then 03:00 CET, two
      real hours apart. A job at 01:30 in New York on fall-back day fires once, at 01:30 EDT.
      (Vixie cron and cronie run wildcard-hour jobs through the repeated hour; we do not:
      one rule for all expressions, and each wall time owns one idempotency key.)
    Fire times are whole seconds, returned as aware UTC datetimes.

Misfires (``due``)
    The scheduler calls ``due`` when the stored next fire time has come. A due fire time is
    ON TIME when it is at most ``MISFIRE_GRACE`` (60 s) before now. ``due`` only ever fires
    the LATEST due fire time, so a schedule whose period is shorter than the grace (every
    second) is never "too late" after downtime: its latest due time is at most one period old.
    ``skip`` fires the latest due time if it is on time, else nothing; ``run_once`` fires the
    latest due time however late. Every other due time is counted in ``Due.missed``. The
    next fire time returned is always the first one strictly after now. Lateness is measured
    in whole seconds (fire times and now are floored to the second).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Literal, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

Misfire = Literal["skip", "run_once"]
MISFIRES: tuple[str, ...] = ("skip", "run_once")

# A due fire time at most this much before now is on time (the scheduler was merely late: a
# poll interval, a GC pause, a slow transaction), not a misfire. See the module docstring for
# schedules whose period is shorter than this.
MISFIRE_GRACE = timedelta(seconds=60)

# Longer than the longest wait between two fires of any valid expression (29 February after a
# century year that is no leap year: 8 years; the 1st of a month on a given weekday: < 12).
_SEARCH_YEARS = 30
# ``due`` counts missed fire times one by one up to this many, then by arithmetic on the wall
# clock (the same count: see _count_fires). A per-second schedule after a year of downtime
# thus costs milliseconds, not 31 million steps.
_EXACT_COUNT_LIMIT = 1000
_MAX_EXPR_LEN = 256
_SECOND = timedelta(seconds=1)


class CronError(ValueError):
    """A cron expression or time zone that cannot be used; the message names the field.

    ``field`` is the field's name (``minute``, ``day-of-week``, ``timezone``, ...) or None when
    the expression as a whole is wrong (field count, unknown alias).
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # names[i] is value low + i
    hint: str = ""


_SECONDS = _Field("second", 0, 59)
_MINUTES = _Field("minute", 0, 59)
_HOURS = _Field("hour", 0, 23)
_DOM = _Field("day-of-month", 1, 31)
_MONTHS = _Field(
    "month", 1, 12, ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), " or jan-dec"
)
# 7 is accepted as Sunday and folded onto 0 after parsing.
_DOW = _Field(
    "day-of-week", 0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat"), " (0 and 7 are Sunday) or sun-sat"
)

_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # February as in a leap year


@dataclass(frozen=True)
class CronSpec:
    """A parsed expression. ``expr`` is the normalised text (lower case, single spaces, an
    alias kept as written); the tuples are the sorted matching values of each field."""

    expr: str
    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: tuple[int, ...]
    months: tuple[int, ...]
    weekdays: tuple[int, ...]  # 0 = Sunday
    dom_star: bool  # the day-of-month field starts with '*' (Vixie's rule for AND vs OR)
    dow_star: bool

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = day.isoweekday() % 7 in self.weekdays
        if self.dom_star or self.dow_star:
            return dom and dow
        return dom or dow


def parse_cron(expr: str) -> CronSpec:
    """Parse a 5-field expression, a 6-field one with seconds first, or an ``@`` alias."""
    if len(expr) > _MAX_EXPR_LEN:
        raise CronError(f"cron expression is too long: at most {_MAX_EXPR_LEN} characters")
    text = " ".join(expr.split()).lower()
    if not text:
        raise CronError("cron expression is empty: expected 5 fields (minute hour day-of-month month day-of-week)")
    if text.startswith("@"):
        if text not in _ALIASES:
            known = ", ".join(_ALIASES)
            raise CronError(f"cron expression '{text}': unknown alias, use one of {known}")
        fields = _ALIASES[text].split()
    else:
        fields = text.split()
    if len(fields) == 5:
        fields = ["0", *fields]
    elif len(fields) != 6:
        raise CronError(
            f"cron expression '{text}': expected 5 fields (minute hour day-of-month month day-of-week) "
            f"or 6 with seconds first, got {len(fields)}"
        )
    sec, minute, hour, dom, month, dow = fields
    spec = CronSpec(
        expr=text,
        seconds=_parse_field(_SECONDS, sec),
        minutes=_parse_field(_MINUTES, minute),
        hours=_parse_field(_HOURS, hour),
        days=_parse_field(_DOM, dom),
        months=_parse_field(_MONTHS, month),
        weekdays=tuple(sorted({0 if d == 7 else d for d in _parse_field(_DOW, dow)})),
        dom_star=dom.startswith("*"),
        dow_star=dow.startswith("*"),
    )
    # Only a restricted day-of-month with an unrestricted day-of-week can miss every month
    # (a field starting with '*' includes the 1st; a restricted day-of-week fires weekly).
    if not spec.dom_star and spec.dow_star:
        if not any(d <= _DAYS_IN_MONTH[m - 1] for m in spec.months for d in spec.days):
            raise CronError(f"day-of-month field '{dom}': never occurs in month field '{month}'", "day-of-month")
    return spec


def _parse_field(field: _Field, text: str) -> tuple[int, ...]:
    values: set[int] = set()
    for item in text.split(","):
        if not item:
            raise CronError(f"{field.name} field '{text}': empty list item", field.name)
        rng, slash, step_text = item.partition("/")
        step = 1
        if slash:
            top = field.high - field.low if field is not _DOW else 6
            if not (step_text.isascii() and step_text.isdigit()) or not 1 <= int(step_text) <= top:
                raise CronError(f"{field.name} field '{item}': step must be a number 1-{top}", field.name)
            step = int(step_text)
        if rng == "*":
            low, high = field.low, (6 if field is _DOW else field.high)
        elif "-" in rng:
            first, _, last = rng.partition("-")
            low, high = _value(field, first, item), _value(field, last, item)
            if low > high:
                raise CronError(f"{field.name} field '{item}': range start is after its end", field.name)
        else:
            low = _value(field, rng, item)
            # 'a/n' means a, a+n, ... up to the field's maximum (as cronie reads it).
            high = field.high if slash else low
        values.update(range(low, high + 1, step))
    return tuple(sorted(values))


def _value(field: _Field, token: str, item: str) -> int:
    if token.isascii() and token.isdigit():
        value = int(token)
        if not field.low <= value <= field.high:
            raise CronError(f"{field.name} field '{item}': values are {field.low}-{field.high}{field.hint}", field.name)
        return value
    if token in field.names:
        return field.low + field.names.index(token)
    if not token:
        raise CronError(f"{field.name} field '{item}': a number is missing", field.name)
    if token.isascii() and token.isalpha():
        if field.names:
            known = f"{field.names[0]}-{field.names[-1]}"
            raise CronError(f"{field.name} field '{item}': unknown name '{token}', use {known}", field.name)
        raise CronError(f"{field.name} field '{item}': names are not allowed here, use numbers", field.name)
    raise CronError(
        f"{field.name} field '{item}': '{token}' is not a number {field.low}-{field.high}{field.hint}", field.name
    )


def parse_timezone(name: str) -> ZoneInfo:
    """The IANA zone ``name`` (``Europe/Berlin``, ``UTC``); CronError names it if unknown."""
    if not name or len(name) > 255 or not name.isascii() or "\x00" in name:
        raise CronError(f"timezone '{name}': not an IANA time zone name such as 'Europe/Berlin'", "timezone")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        # OSError: a name like 'America' is a directory of the zone database, not a zone.
        raise CronError(f"timezone '{name}': unknown IANA time zone", "timezone") from exc


# --- the next matching wall-clock time (naive datetimes, whole seconds) ---------------------


def _ceil(values: tuple[int, ...], x: int) -> int | None:
    i = bisect.bisect_left(values, x)
    return values[i] if i < len(values) else None


def _floor(values: tuple[int, ...], x: int) -> int | None:
    i = bisect.bisect_right(values, x)
    return values[i - 1] if i else None


def _next_tod(spec: CronSpec, h: int, m: int, s: int) -> tuple[int, int, int] | None:
    """The first matching time of day at or after h:m:s, None if none is left that day."""
    hh = _ceil(spec.hours, h)
    if hh is None:
        return None
    if hh == h:
        mm = _ceil(spec.minutes, m)
        if mm == m:
            ss = _ceil(spec.seconds, s)
            if ss is not None:
                return h, m, ss
            mm = _ceil(spec.minutes, m + 1)
        if mm is not None:
            return h, mm, spec.seconds[0]
        hh = _ceil(spec.hours, h + 1)
        if hh is None:
            return None
    return hh, spec.minutes[0], spec.seconds[0]


def _prev_tod(spec: CronSpec, h: int, m: int, s: int) -> tuple[int, int, int] | None:
    """The last matching time of day at or before h:m:s, None if none is earlier that day."""
    hh = _floor(spec.hours, h)
    if hh is None:
        return None
    if hh == h:
        mm = _floor(spec.minutes, m)
        if mm == m:
            ss = _floor(spec.seconds, s)
            if ss is not None:
                return h, m, ss
            mm = _floor(spec.minutes, m - 1)
        if mm is not None:
            return h, mm, spec.seconds[-1]
        hh = _floor(spec.hours, h - 1)
        if hh is None:
            return None
    return hh, spec.minutes[-1], spec.seconds[-1]


def _next_wall(spec: CronSpec, start: datetime) -> datetime:
    """The first matching naive wall-clock time at or after ``start``."""
    day, tod = start.date(), (start.hour, start.minute, start.second)
    limit = start.year + _SEARCH_YEARS
    while day.year <= limit:
        if day.month not in spec.months:
            month = _ceil(spec.months, day.month)
            day = date(day.year, month, 1) if month else date(day.year + 1, spec.months[0], 1)
            tod = (0, 0, 0)
            continue
        if spec.day_matches(day):
            found = _next_tod(spec, *tod)
            if found is not None:
                return datetime(day.year, day.month, day.day, *found)
        day, tod = day + timedelta(days=1), (0, 0, 0)
    raise ValueError(f"cron '{spec.expr}' has no fire time within {_SEARCH_YEARS} years of {start}")


def _prev_wall(spec: CronSpec, start: datetime) -> datetime:
    """The last matching naive wall-clock time at or before ``start``."""
    day, tod = start.date(), (start.hour, start.minute, start.second)
    end = (23, 59, 59)
    limit = start.year - _SEARCH_YEARS
    while day.year >= limit:
        if day.month not in spec.months:
            month = _floor(spec.months, day.month)
            first = date(day.year, month, 1) if month else date(day.year - 1, spec.months[-1], 1)
            day = first.replace(day=_month_days(first.year, first.month))
            tod = end
            continue
        if spec.day_matches(day):
            found = _prev_tod(spec, *tod)
            if found is not None:
                return datetime(day.year, day.month, day.day, *found)
        day, tod = day - timedelta(days=1), end
    raise ValueError(f"cron '{spec.expr}' has no fire time within {_SEARCH_YEARS} years before {start}")


def _month_days(year: int, month: int) -> int:
    nxt = date(year + month // 12, month % 12 + 1, 1)
    return (nxt - timedelta(days=1)).day


# --- wall clock <-> instants ------------------------------------------------------------------


def _naive(local: datetime) -> datetime:
    return local.replace(tzinfo=None, fold=0)


def _offset(instant: datetime, tz: tzinfo) -> timedelta:
    offset = instant.astimezone(tz).utcoffset()
    assert offset is not None  # an aware datetime in a tzinfo zone always has one
    return offset


def _transition(lo: datetime, hi: datetime, tz: tzinfo) -> datetime:
    """The first instant in (lo, hi] with hi's UTC offset; lo's offset differs (aware UTC)."""
    target = hi.astimezone(tz).utcoffset()
    a, b = int(lo.timestamp()), int(hi.timestamp())
    while b - a > 1:  # offset(a) != target, offset(b) == target; zone changes fall on whole seconds
        mid = (a + b) // 2
        if datetime.fromtimestamp(mid, tz).utcoffset() == target:
            b = mid
        else:
            a = mid
    return datetime.fromtimestamp(b, UTC)


def _resolve(wall: datetime, tz: tzinfo) -> datetime:
    """The instant (UTC) a matching wall time fires at: its first occurrence; the end of the
    gap if it does not exist."""
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    if _naive(first.astimezone(tz)) == wall:
        return first
    # In a gap fold=0 reads the wall time with the offset before the change, fold=1 with the
    # one after: the change lies between those two readings.
    other = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    return _transition(min(first, other), max(first, other), tz)


def _fold_end(local: datetime, tz: tzinfo) -> datetime | None:
    """If ``local`` is the SECOND occurrence of a repeated wall time, the first wall time after
    the repeated stretch (every repeated wall time already fired on its first occurrence)."""
    first = local.replace(fold=0)
    if local.fold == 0 or first.utcoffset() == local.utcoffset():
        return None
    change = _transition(first.astimezone(UTC), local.astimezone(UTC), tz)
    return _naive((change - _SECOND).astimezone(tz)) + _SECOND


def _require_aware(name: str, value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got {value!r}")
    return value.astimezone(UTC).replace(microsecond=0)


def next_fire_after(spec: CronSpec, tz: tzinfo, after: datetime) -> datetime:
    """The first fire time strictly after ``after`` (aware), as an aware UTC datetime."""
    after = _require_aware("after", after)  # fires are whole seconds: flooring keeps 'strictly after'
    local = after.astimezone(tz)
    wall = _naive(local) + _SECOND
    fold_end = _fold_end(local, tz)
    if fold_end is not None:
        wall = max(wall, fold_end)
    while True:
        candidate = _next_wall(spec, wall)
        fire = _resolve(candidate, tz)
        if fire > after:
            return fire
        wall = candidate + _SECOND  # a gap time that resolved to a gap end already passed


def prev_fire_at_or_before(spec: CronSpec, tz: tzinfo, at: datetime) -> datetime:
    """The last fire time at or before ``at`` (aware), as an aware UTC datetime."""
    at = _require_aware("at", at)
    local = at.astimezone(tz)
    wall = _naive(local)
    fold_end = _fold_end(local, tz)
    if fold_end is not None:
        wall = fold_end - _SECOND
    while True:
        candidate = _prev_wall(spec, wall)
        fire = _resolve(candidate, tz)
        if fire <= at:
            return fire
        wall = candidate - _SECOND


def first_fire(spec: CronSpec, tz: tzinfo, now: datetime) -> datetime:
    """The first fire time of a new or re-enabled schedule: none in the past is owed."""
    return next_fire_after(spec, tz, now)


def fire_times(spec: CronSpec, tz: tzinfo, after: datetime) -> Iterable[datetime]:
    """Fire times strictly after ``after``, in order, without end (for previews and tests)."""
    fire = after
    while True:
        fire = next_fire_after(spec, tz, fire)
        yield fire


# --- misfires --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Due:
    """What the scheduler does now for one schedule.

    fire_at       the fire time to enqueue one job for (UTC), or None.
    missed        due fire times that get no job (misfires, for metrics). Exact; beyond 1000
                  counted by arithmetic, not one by one, so a year of per-second fires is cheap.
    next_fire_at  the fire time to store next; always strictly after ``now``.
    """

    fire_at: datetime | None
    missed: int
    next_fire_at: datetime


def due(spec: CronSpec, tz: tzinfo, next_fire_at: datetime, now: datetime, misfire: Misfire) -> Due:
    """Decide for a schedule whose stored next fire time is ``next_fire_at``.

    A pure function of its inputs: called again with the same ones (after a crash between the
    enqueue and the bookkeeping) it names the same fire time, and the job's idempotency key
    (``fire_key``) makes the second enqueue a no-op.
    """
    if misfire not in MISFIRES:
        raise ValueError(f"misfire must be one of {MISFIRES}, got {misfire!r}")
    next_fire_at = _require_aware("next_fire_at", next_fire_at)
    now_s = _require_aware("now", now)
    if now_s < next_fire_at:
        return Due(None, 0, next_fire_at)
    count, latest, fire = 1, next_fire_at, next_fire_after(spec, tz, next_fire_at)
    while fire <= now_s and count < _EXACT_COUNT_LIMIT:
        count, latest = count + 1, fire
        fire = next_fire_after(spec, tz, fire)
    if fire <= now_s:
        # Long downtime of a frequent schedule: find the latest directly and count by arithmetic.
        latest = prev_fire_at_or_before(spec, tz, now_s)
        count = _count_fires(spec, tz, next_fire_at, latest)
        fire = next_fire_after(spec, tz, now_s)
    on_time = now_s - latest <= MISFIRE_GRACE
    fire_at = latest if (on_time or misfire == "run_once") else None
    return Due(fire_at, count - (fire_at is not None), fire)


def _count_fires(spec: CronSpec, tz: tzinfo, first: datetime, last: datetime) -> int:
    """How many fire times lie in [first, last], both fire times (aware UTC).

    Each matching wall time fires once, so this is the count of matching wall times between
    the two, less the ones that share an instant: the matching wall times in a gap and at its
    end all fire at the gap's end. (A repeated hour needs no correction: its wall times fire
    once, on the first pass.)
    """
    first_wall, last_wall = _naive(first.astimezone(tz)), _naive(last.astimezone(tz))
    total = _count_walls(spec, first_wall, last_wall)
    day, one_day = first_wall.date(), timedelta(days=1)
    while day <= last_wall.date():
        start = _resolve(datetime(day.year, day.month, day.day), tz)
        following = day + one_day
        end = _resolve(datetime(following.year, following.month, following.day), tz)
        if _offset(end, tz) > _offset(start, tz):  # the clocks go forward this day
            change = _transition(start, end, tz)
            gap_first = _naive((change - _SECOND).astimezone(tz)) + _SECOND
            gap_end = _naive(change.astimezone(tz))
            shared = _count_walls(spec, max(gap_first, first_wall), min(gap_end, last_wall))
            total -= max(shared - 1, 0)
        day = following
    return total


def _count_walls(spec: CronSpec, first: datetime, last: datetime) -> int:
    """How many matching naive wall times lie in [first, last]."""
    if last < first:
        return 0
    per_day = len(spec.hours) * len(spec.minutes) * len(spec.seconds)

    def upto(t: datetime) -> int:  # matching times of day <= t's
        n = bisect.bisect_left(spec.hours, t.hour) * len(spec.minutes) * len(spec.seconds)
        if t.hour in spec.hours:
            n += bisect.bisect_left(spec.minutes, t.minute) * len(spec.seconds)
            if t.minute in spec.minutes:
                n += bisect.bisect_right(spec.seconds, t.second)
        return n

    before_first = upto(first - _SECOND) if first.time() != datetime.min.time() else 0
    d0, d1 = first.date(), last.date()
    if d0 == d1:
        return (upto(last) - before_first) if spec.day_matches(d0) else 0
    total = (per_day - before_first) * spec.day_matches(d0) + upto(last) * spec.day_matches(d1)
    day = d0 + timedelta(days=1)
    while day < d1:
        total += per_day * spec.day_matches(day)
        day += timedelta(days=1)
    return total


def fire_key(name: str, fire_at: datetime) -> str:
    """The idempotency key of the job a fire enqueues: ``schedule:{name}:2026-12-04T02:00:00Z``."""
    at = _require_aware("fire_at", fire_at)
    return f"schedule:{name}:{at.strftime('%Y-%m-%dT%H:%M:%SZ')}"


# --- clocks ----------------------------------------------------------------------------------


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, aware, in UTC."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to: tests drive schedules through days in no time."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware datetime")
        self._now = start.astimezone(UTC)

    def now(self) -> datetime:
        return self._now

    def set(self, at: datetime) -> None:
        if at.tzinfo is None:
            raise ValueError("ManualClock.set needs a timezone-aware datetime")
        self._now = at.astimezone(UTC)

    def advance(self, delta: timedelta | float) -> datetime:
        self._now += delta if isinstance(delta, timedelta) else timedelta(seconds=delta)
        return self._now
