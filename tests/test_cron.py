"""Cron arithmetic of recurring schedules (jobq.domain.schedules): pure, no database, no waiting.

Daylight-saving cases run in real IANA zones; a zone missing from the machine's zoneinfo fails
these tests (parse_timezone raises), it never skips them.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from itertools import islice

import pytest

from jobq.domain.schedules import (
    MISFIRE_GRACE,
    MISFIRES,
    CronError,
    CronSpec,
    Due,
    ManualClock,
    SystemClock,
    due,
    fire_key,
    fire_times,
    first_fire,
    next_fire_after,
    parse_cron,
    parse_timezone,
    prev_fire_at_or_before,
)

UTCZ = parse_timezone("UTC")
BERLIN = parse_timezone("Europe/Berlin")
NEW_YORK = parse_timezone("America/New_York")
LORD_HOWE = parse_timezone("Australia/Lord_Howe")  # daylight saving of 30 minutes


def at(text: str, tz=UTCZ) -> datetime:
    """The instant (UTC) of a local wall time 'YYYY-MM-DD HH:MM[:SS]' in tz, first occurrence.

    In UTC because Python never finds an aware datetime in a repeated hour equal to one in
    another zone (PEP 495), which would make these comparisons fail for the wrong reason.
    """
    return datetime.fromisoformat(text).replace(tzinfo=tz).astimezone(UTC)


def second_pass(text: str, tz) -> datetime:
    """The SECOND occurrence of a wall time repeated when the clocks go back."""
    local = datetime.fromisoformat(text).replace(tzinfo=tz, fold=1)
    assert local.utcoffset() != local.replace(fold=0).utcoffset(), f"{text} is not repeated in {tz}"
    return local.astimezone(UTC)


def fires(expr: str, tz, after: datetime, n: int) -> list[str]:
    """The next n fire times as local ISO strings with offset: what a reader checks by eye."""
    return [f.astimezone(tz).isoformat() for f in islice(fire_times(parse_cron(expr), tz, after), n)]


# --- parsing -----------------------------------------------------------------------------------


def test_five_fields_fire_at_second_zero_and_keep_normalised_text() -> None:
    spec = parse_cron("  */15   9-17 * *  MON-fri ")
    assert spec.expr == "*/15 9-17 * * mon-fri"
    assert spec.seconds == (0,)
    assert spec.minutes == (0, 15, 30, 45)
    assert spec.hours == tuple(range(9, 18))
    assert spec.weekdays == (1, 2, 3, 4, 5)


def test_six_fields_put_seconds_first() -> None:
    spec = parse_cron("*/1 * * * * *")
    assert spec.seconds == tuple(range(60))
    assert spec.expr == "*/1 * * * * *"
    assert fires("*/1 * * * * *", UTCZ, at("2027-01-01 00:00:00.5"), 3) == [
        "2027-01-01T00:00:01+00:00",
        "2027-01-01T00:00:02+00:00",
        "2027-01-01T00:00:03+00:00",
    ]
    assert parse_cron("30 0 12 * * *").seconds == (30,)


@pytest.mark.parametrize(
    ("field_text", "attr", "values"),
    [
        ("1,5,7 * * * *", "minutes", (1, 5, 7)),
        ("10-20/5 * * * *", "minutes", (10, 15, 20)),
        ("50/4 * * * *", "minutes", (50, 54, 58)),  # a/n = a-max/n
        ("* * * jan,Mar,dec *", "months", (1, 3, 12)),
        ("* * * feb-apr *", "months", (2, 3, 4)),
        ("* * * */3 *", "months", (1, 4, 7, 10)),
        ("* * * * 7", "weekdays", (0,)),
        ("* * * * 0,7", "weekdays", (0,)),
        ("* * * * 5-7", "weekdays", (0, 5, 6)),
        ("* * * * sun-sat", "weekdays", (0, 1, 2, 3, 4, 5, 6)),
        ("* * * * */2", "weekdays", (0, 2, 4, 6)),
        ("* 0-23/6 * * *", "hours", (0, 6, 12, 18)),
        ("* * 1,15,31 * *", "days", (1, 15, 31)),
    ],
)
def test_field_forms(field_text: str, attr: str, values: tuple[int, ...]) -> None:
    assert getattr(parse_cron(field_text), attr) == values


@pytest.mark.parametrize(
    ("alias", "same_as"),
    [
        ("@hourly", "0 * * * *"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
    ],
)
def test_aliases(alias: str, same_as: str) -> None:
    spec, plain = parse_cron(alias.upper()), parse_cron(same_as)
    assert spec.expr == alias
    assert (spec.minutes, spec.hours, spec.days, spec.months, spec.weekdays, spec.dom_star, spec.dow_star) == (
        plain.minutes,
        plain.hours,
        plain.days,
        plain.months,
        plain.weekdays,
        plain.dom_star,
        plain.dow_star,
    )


@pytest.mark.parametrize(
    ("expr", "field", "words"),
    [
        ("* * * *", None, "expected 5 fields"),
        ("* * * * * * *", None, "got 7"),
        ("", None, "empty"),
        ("61 * * * *", "minute", "minute field '61': values are 0-59"),
        ("* 24 * * *", "hour", "hour field '24': values are 0-23"),
        ("* * 0 * *", "day-of-month", "day-of-month field '0': values are 1-31"),
        ("* * 32 * *", "day-of-month", "values are 1-31"),
        ("* * * 13 *", "month", "month field '13': values are 1-12"),
        ("* * * * 8", "day-of-week", "day-of-week field '8': values are 0-7"),
        ("60 * * * * *", "second", "second field '60': values are 0-59"),
        ("*/0 * * * *", "minute", "minute field '*/0': step must be a number 1-59"),
        ("*/60 * * * *", "minute", "step must be a number 1-59"),
        ("*/x * * * *", "minute", "step must be a number"),
        ("1-5/ * * * *", "minute", "step must be a number"),
        ("* */24 * * *", "hour", "step must be a number 1-23"),
        ("* * * * */7", "day-of-week", "step must be a number 1-6"),
        ("* * * foo *", "month", "month field 'foo': unknown name 'foo', use jan-dec"),
        ("* * * * funday", "day-of-week", "unknown name 'funday', use sun-sat"),
        ("mon * * * *", "minute", "names are not allowed"),
        ("1,,2 * * * *", "minute", "minute field '1,,2': empty list item"),
        ("1, * * * *", "minute", "empty list item"),
        ("30-10 * * * *", "minute", "minute field '30-10': range start is after its end"),
        ("-5 * * * *", "minute", "a number is missing"),
        ("5- * * * *", "minute", "a number is missing"),
        ("1.5 * * * *", "minute", "'1.5' is not a number 0-59"),
        ("\u0661 * * * *", "minute", "is not a number"),  # an Arabic-Indic digit: isdigit, not ASCII
        ("0 0 30 2 *", "day-of-month", "day-of-month field '30': never occurs in month field '2'"),
        ("0 0 31 apr,jun,sep,nov *", "day-of-month", "never occurs"),
        ("@reboot", None, "unknown alias"),
        ("@every 5m", None, "unknown alias"),
        ("* " * 200, None, "too long"),
    ],
)
def test_bad_expressions_name_the_field_and_the_fault(expr: str, field: str | None, words: str) -> None:
    with pytest.raises(CronError) as caught:
        parse_cron(expr)
    assert words in str(caught.value)
    assert caught.value.field == field
    assert isinstance(caught.value, ValueError)


def test_feb_29_alone_is_valid_and_31st_in_some_month_is_valid() -> None:
    parse_cron("0 0 29 2 *")
    parse_cron("0 0 31 feb,mar *")
    parse_cron("0 0 30 2 mon")  # OR semantics: fires on Mondays in February


def test_timezones() -> None:
    assert parse_timezone("America/New_York").key == "America/New_York"
    assert parse_timezone("UTC").key == "UTC"
    for bad in ["Mars/Olympus_Mons", "", "America", "/etc/passwd", "../../etc/passwd", "Europe/Berlin\x00", "x" * 300]:
        with pytest.raises(CronError) as caught:
            parse_timezone(bad)
        assert caught.value.field == "timezone"
        assert "timezone '" in str(caught.value)


def test_the_zones_these_tests_need_are_installed() -> None:
    # Fails loudly (no skip) on a machine without tzdata: the DST tests below would be void.
    for zone in (BERLIN, NEW_YORK, LORD_HOWE):
        assert datetime(2027, 1, 15, tzinfo=zone).utcoffset() != datetime(2027, 7, 15, tzinfo=zone).utcoffset()


# --- next fire times ---------------------------------------------------------------------------


def test_next_fire_is_strictly_after() -> None:
    spec = parse_cron("0 12 * * *")
    assert next_fire_after(spec, UTCZ, at("2027-05-05 12:00")) == at("2027-05-06 12:00")
    assert next_fire_after(spec, UTCZ, at("2027-05-05 11:59:59.999")) == at("2027-05-05 12:00")
    assert next_fire_after(spec, UTCZ, at("2027-05-05 12:00:00.001")) == at("2027-05-06 12:00")
    result = next_fire_after(spec, BERLIN, at("2027-05-05 00:00"))
    assert result.tzinfo is UTC and result == at("2027-05-05 10:00")  # 12:00 CEST
    assert first_fire(spec, UTCZ, at("2027-05-05 12:00")) == at("2027-05-06 12:00")


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        next_fire_after(parse_cron("* * * * *"), UTCZ, datetime(2027, 1, 1))


def test_ordinary_sequences() -> None:
    assert fires("*/20 * * * *", UTCZ, at("2027-12-31 23:30"), 3) == [
        "2027-12-31T23:40:00+00:00",
        "2028-01-01T00:00:00+00:00",
        "2028-01-01T00:20:00+00:00",
    ]
    assert fires("30 9 * * mon-fri", UTCZ, at("2027-01-01 10:00"), 3) == [  # a Friday
        "2027-01-04T09:30:00+00:00",
        "2027-01-05T09:30:00+00:00",
        "2027-01-06T09:30:00+00:00",
    ]
    assert fires("0 0 1 */6 *", UTCZ, at("2027-02-01"), 2) == ["2027-07-01T00:00:00+00:00", "2028-01-01T00:00:00+00:00"]


def test_month_ends() -> None:
    assert fires("0 0 31 * *", UTCZ, at("2027-01-31"), 4) == [
        "2027-03-31T00:00:00+00:00",
        "2027-05-31T00:00:00+00:00",
        "2027-07-31T00:00:00+00:00",
        "2027-08-31T00:00:00+00:00",
    ]
    assert fires("0 0 29 * *", UTCZ, at("2028-01-30"), 2) == ["2028-02-29T00:00:00+00:00", "2028-03-29T00:00:00+00:00"]
    assert fires("0 0 29 * *", UTCZ, at("2027-01-30"), 1) == ["2027-03-29T00:00:00+00:00"]


def test_feb_29_jumps_to_the_next_leap_year() -> None:
    assert fires("0 0 29 2 *", UTCZ, at("2024-03-01"), 3) == [
        "2028-02-29T00:00:00+00:00",
        "2032-02-29T00:00:00+00:00",
        "2036-02-29T00:00:00+00:00",
    ]
    # 2100 is no leap year: eight years from 2096 to 2104.
    assert fires("0 0 29 2 *", UTCZ, at("2096-03-01"), 1) == ["2104-02-29T00:00:00+00:00"]


def test_day_of_month_or_day_of_week_when_both_restricted() -> None:
    # Vixie: both restricted -> either matches. 2027-08-13 is a Friday; Fridays in August 2027: 6, 13, 20, 27.
    assert fires("0 0 13 * fri", UTCZ, at("2027-08-01"), 4) == [
        "2027-08-06T00:00:00+00:00",
        "2027-08-13T00:00:00+00:00",
        "2027-08-20T00:00:00+00:00",
        "2027-08-27T00:00:00+00:00",
    ]
    assert fires("0 0 1,15 * mon", UTCZ, at("2027-03-01 01:00"), 3) == [  # 1 March 2027 is a Monday
        "2027-03-08T00:00:00+00:00",
        "2027-03-15T00:00:00+00:00",
        "2027-03-22T00:00:00+00:00",
    ]
    # One field starting with '*' -> both must match: odd days that are Fridays.
    assert fires("0 0 */2 * fri", UTCZ, at("2027-08-01"), 2) == [
        "2027-08-13T00:00:00+00:00",
        "2027-08-27T00:00:00+00:00",
    ]
    assert fires("0 0 * * fri", UTCZ, at("2027-08-01"), 1) == ["2027-08-06T00:00:00+00:00"]
    assert fires("0 0 13 * *", UTCZ, at("2027-08-01"), 1) == ["2027-08-13T00:00:00+00:00"]
    assert fires("0 0 13 * */1", UTCZ, at("2027-08-01"), 1) == ["2027-08-13T00:00:00+00:00"]


def test_previous_fire() -> None:
    spec = parse_cron("0 12 * * *")
    assert prev_fire_at_or_before(spec, UTCZ, at("2027-05-05 12:00")) == at("2027-05-05 12:00")
    assert prev_fire_at_or_before(spec, UTCZ, at("2027-05-05 11:59")) == at("2027-05-04 12:00")
    assert prev_fire_at_or_before(parse_cron("0 0 29 2 *"), UTCZ, at("2027-01-01")) == at("2024-02-29")
    assert prev_fire_at_or_before(parse_cron("0 0 31 * *"), UTCZ, at("2027-05-01")) == at("2027-03-31")


# --- daylight saving ---------------------------------------------------------------------------
# Berlin 2027: forward Sun 28 Mar 02:00 CET -> 03:00 CEST; back Sun 31 Oct 03:00 CEST -> 02:00 CET.
# New York 2027: forward Sun 14 Mar 02:00 EST -> 03:00 EDT; back Sun 7 Nov 02:00 EDT -> 01:00 EST.
# Lord Howe 2027: back Sun 4 Apr 02:00 (+11) -> 01:30 (+10:30); forward Sun 3 Oct 02:00 -> 02:30.


def test_the_transitions_are_where_these_tests_think() -> None:
    assert at("2027-03-28 01:59", BERLIN).astimezone(BERLIN).utcoffset() == timedelta(hours=1)
    assert at("2027-03-28 03:00", BERLIN).astimezone(BERLIN).utcoffset() == timedelta(hours=2)
    assert second_pass("2027-10-31 02:30", BERLIN).astimezone(BERLIN).utcoffset() == timedelta(hours=1)
    assert at("2027-03-14 03:00", NEW_YORK).astimezone(NEW_YORK).utcoffset() == timedelta(hours=-4)
    assert second_pass("2027-11-07 01:30", NEW_YORK).astimezone(NEW_YORK).utcoffset() == timedelta(hours=-5)
    assert at("2027-10-03 02:30", LORD_HOWE).astimezone(LORD_HOWE).utcoffset() == timedelta(hours=11)
    assert second_pass("2027-04-04 01:45", LORD_HOWE).astimezone(LORD_HOWE).utcoffset() == timedelta(
        hours=10, minutes=30
    )


@pytest.mark.parametrize(
    ("tz", "day_before", "expected"),
    [
        (BERLIN, "2027-03-27 12:00", ["2027-03-28T03:00:00+02:00", "2027-03-29T02:30:00+02:00"]),
        (NEW_YORK, "2027-03-13 12:00", ["2027-03-14T03:00:00-04:00", "2027-03-15T02:30:00-04:00"]),
    ],
)
def test_spring_forward_daily_0230_fires_at_the_end_of_the_gap(tz, day_before: str, expected: list[str]) -> None:
    assert fires("30 2 * * *", tz, at(day_before, tz), 2) == expected


@pytest.mark.parametrize(
    ("tz", "day_before", "expected"),
    [
        (BERLIN, "2027-10-30 12:00", ["2027-10-31T02:30:00+02:00", "2027-11-01T02:30:00+01:00"]),
        (NEW_YORK, "2027-11-06 12:00", ["2027-11-07T02:30:00-05:00", "2027-11-08T02:30:00-05:00"]),
    ],
)
def test_fall_back_daily_0230_fires_once(tz, day_before: str, expected: list[str]) -> None:
    assert fires("30 2 * * *", tz, at(day_before, tz), 2) == expected


def test_fall_back_0130_in_new_york_fires_once_on_its_first_occurrence() -> None:
    assert fires("30 1 * * *", NEW_YORK, at("2027-11-06 12:00", NEW_YORK), 2) == [
        "2027-11-07T01:30:00-04:00",
        "2027-11-08T01:30:00-05:00",
    ]
    # Asked from inside the repeated hour (01:10 EST, the second 01:10), the 01:30 is not owed again.
    second_0110 = second_pass("2027-11-07 01:10", NEW_YORK)
    assert fires("30 1 * * *", NEW_YORK, second_0110, 1) == ["2027-11-08T01:30:00-05:00"]


def test_hourly_across_both_changes_in_two_zones() -> None:
    assert fires("0 * * * *", BERLIN, at("2027-03-28 00:30", BERLIN), 4) == [
        "2027-03-28T01:00:00+01:00",
        "2027-03-28T03:00:00+02:00",  # 02:00 does not exist: one fire at the gap's end, which is also 03:00
        "2027-03-28T04:00:00+02:00",
        "2027-03-28T05:00:00+02:00",
    ]
    assert fires("0 * * * *", BERLIN, at("2027-10-31 00:30", BERLIN), 4) == [
        "2027-10-31T01:00:00+02:00",
        "2027-10-31T02:00:00+02:00",
        "2027-10-31T03:00:00+01:00",  # the repeated 02:00 CET does not fire
        "2027-10-31T04:00:00+01:00",
    ]
    assert fires("0 * * * *", NEW_YORK, at("2027-03-14 00:30", NEW_YORK), 3) == [
        "2027-03-14T01:00:00-05:00",
        "2027-03-14T03:00:00-04:00",
        "2027-03-14T04:00:00-04:00",
    ]
    assert fires("0 * * * *", NEW_YORK, at("2027-11-07 00:30", NEW_YORK), 3) == [
        "2027-11-07T01:00:00-04:00",
        "2027-11-07T02:00:00-05:00",  # 01:00 EST, the repeated one, does not fire
        "2027-11-07T03:00:00-05:00",
    ]


def test_every_15_minutes_has_no_fires_in_the_gap_and_none_again_in_the_repeated_hour() -> None:
    assert fires("*/15 * * * *", BERLIN, at("2027-03-28 01:40", BERLIN), 3) == [
        "2027-03-28T01:45:00+01:00",
        "2027-03-28T03:00:00+02:00",
        "2027-03-28T03:15:00+02:00",
    ]
    assert fires("*/15 * * * *", BERLIN, at("2027-10-31 02:40", BERLIN), 3) == [
        "2027-10-31T02:45:00+02:00",
        "2027-10-31T03:00:00+01:00",  # 75 real minutes later: 02:00-02:45 CET are not fired again
        "2027-10-31T03:15:00+01:00",
    ]
    assert fires("*/15 * * * *", NEW_YORK, at("2027-03-14 01:40", NEW_YORK), 2) == [
        "2027-03-14T01:45:00-05:00",
        "2027-03-14T03:00:00-04:00",
    ]
    assert fires("*/15 * * * *", NEW_YORK, at("2027-11-07 01:40", NEW_YORK), 2) == [
        "2027-11-07T01:45:00-04:00",
        "2027-11-07T02:00:00-05:00",
    ]
    # From inside the repeated hour, the next fire is the first wall time not yet seen.
    second_0220 = second_pass("2027-10-31 02:20", BERLIN)
    assert fires("*/15 * * * *", BERLIN, second_0220, 1) == ["2027-10-31T03:00:00+01:00"]


def test_half_hour_daylight_saving_in_lord_howe() -> None:
    # Forward: 02:00-02:29 do not exist; a 02:15 job fires at 02:30 (+11), a 02:45 one as usual.
    assert fires("15 2 * * *", LORD_HOWE, at("2027-10-02 12:00", LORD_HOWE), 2) == [
        "2027-10-03T02:30:00+11:00",
        "2027-10-04T02:15:00+11:00",
    ]
    assert fires("*/10 * * * *", LORD_HOWE, at("2027-10-03 01:45", LORD_HOWE), 4) == [
        "2027-10-03T01:50:00+10:30",
        "2027-10-03T02:30:00+11:00",
        "2027-10-03T02:40:00+11:00",
        "2027-10-03T02:50:00+11:00",
    ]
    # Back: 01:30-01:59 repeat; a 01:45 job fires once, on the first pass (+11).
    assert fires("45 1 * * *", LORD_HOWE, at("2027-04-03 12:00", LORD_HOWE), 2) == [
        "2027-04-04T01:45:00+11:00",
        "2027-04-05T01:45:00+10:30",
    ]


def test_no_day_lost_or_doubled_over_a_year_in_two_zones() -> None:
    for tz in (BERLIN, NEW_YORK):
        got = list(islice(fire_times(parse_cron("30 2 * * *"), tz, at("2027-01-01", tz)), 365))
        days = [f.astimezone(tz).date() for f in got]
        assert days == [datetime(2027, 1, 1).date() + timedelta(days=i) for i in range(365)]


def test_previous_fire_across_the_changes() -> None:
    spec = parse_cron("*/15 * * * *")
    second_0220 = second_pass("2027-10-31 02:20", BERLIN)
    assert prev_fire_at_or_before(spec, BERLIN, second_0220) == at("2027-10-31 02:45", BERLIN)  # CEST, first pass
    assert prev_fire_at_or_before(spec, BERLIN, at("2027-03-28 03:05", BERLIN)) == at("2027-03-28 03:00", BERLIN)
    gap_end = at("2027-03-28 03:00", BERLIN)
    assert prev_fire_at_or_before(parse_cron("30 2 * * *"), BERLIN, gap_end) == gap_end


# --- misfires ----------------------------------------------------------------------------------

HOURLY = parse_cron("0 * * * *")
T0 = at("2027-06-01 10:00")  # a fire time of HOURLY


def test_not_yet_due() -> None:
    assert due(HOURLY, UTCZ, T0, T0 - timedelta(seconds=1), "skip") == Due(None, 0, T0)


@pytest.mark.parametrize("misfire", MISFIRES)
def test_on_time_and_late_within_grace(misfire) -> None:
    assert due(HOURLY, UTCZ, T0, T0, misfire) == Due(T0, 0, T0 + timedelta(hours=1))
    assert due(HOURLY, UTCZ, T0, T0 + MISFIRE_GRACE, misfire) == Due(T0, 0, T0 + timedelta(hours=1))


def test_grace_boundary() -> None:
    late = T0 + MISFIRE_GRACE + timedelta(seconds=1)
    assert due(HOURLY, UTCZ, T0, late, "skip") == Due(None, 1, T0 + timedelta(hours=1))
    assert due(HOURLY, UTCZ, T0, late, "run_once") == Due(T0, 0, T0 + timedelta(hours=1))
    assert MISFIRE_GRACE == timedelta(seconds=60)


def test_downtime_of_half_a_period() -> None:
    now = T0 + timedelta(minutes=30)
    assert due(HOURLY, UTCZ, T0, now, "skip") == Due(None, 1, T0 + timedelta(hours=1))
    assert due(HOURLY, UTCZ, T0, now, "run_once") == Due(T0, 0, T0 + timedelta(hours=1))


def test_downtime_of_exactly_three_periods() -> None:
    # Last fire at 09:00 went fine, so next_fire_at is 10:00; down from 09:00:05 to 12:00:00 exactly.
    # Due: 10:00, 11:00, 12:00; 12:00 is zero seconds late, so even skip fires it.
    now = T0 + timedelta(hours=2)
    assert due(HOURLY, UTCZ, T0, now, "skip") == Due(now, 2, T0 + timedelta(hours=3))
    assert due(HOURLY, UTCZ, T0, now, "run_once") == Due(now, 2, T0 + timedelta(hours=3))


def test_downtime_of_three_periods_and_a_bit() -> None:
    now = T0 + timedelta(hours=2, minutes=10)  # 10:00, 11:00, 12:00 missed; 12:00 is 10 minutes late
    assert due(HOURLY, UTCZ, T0, now, "skip") == Due(None, 3, T0 + timedelta(hours=3))
    assert due(HOURLY, UTCZ, T0, now, "run_once") == Due(T0 + timedelta(hours=2), 2, T0 + timedelta(hours=3))
    # The scheduler merely late on the third: 12:00 is 30 s ago, within grace.
    now = T0 + timedelta(hours=2, seconds=30)
    assert due(HOURLY, UTCZ, T0, now, "skip") == Due(T0 + timedelta(hours=2), 2, T0 + timedelta(hours=3))


def test_scheduler_loop_with_a_manual_clock_through_downtime() -> None:
    """Drive the stored state the way the scheduler will: ticks, an outage, ticks again."""
    spec, clock = parse_cron("*/5 * * * *"), ManualClock(at("2027-06-01 10:00"))
    for misfire, expected_jobs, expected_missed in (("skip", 2, 3), ("run_once", 3, 2)):
        clock.set(at("2027-06-01 10:00"))
        stored, jobs, missed = first_fire(spec, UTCZ, clock.now() - timedelta(seconds=1)), [], 0
        # Ticks each minute: 10:01 fires 10:00 (60 s late: on time); an outage until 10:17:07
        # leaves 10:05, 10:10, 10:15 due (10:15 is 127 s late: skip fires none, run_once fires
        # it); ticks at 10:18-10:22 fire 10:20.
        for step in [1] * 2 + [15 * 60 + 7] + [1] * 5:
            clock.advance(step * 60 if step == 1 else step)
            decision = due(spec, UTCZ, stored, clock.now(), misfire)
            if decision.fire_at is not None:
                jobs.append(fire_key("s", decision.fire_at))
            missed += decision.missed
            assert decision.next_fire_at > clock.now()
            stored = decision.next_fire_at
        assert len(jobs) == len(set(jobs)) == expected_jobs, (misfire, jobs)
        assert missed == expected_missed, misfire


def test_due_is_idempotent() -> None:
    now = T0 + timedelta(hours=5, minutes=3)
    for misfire in MISFIRES:
        first, again = due(HOURLY, UTCZ, T0, now, misfire), due(HOURLY, UTCZ, T0, now, misfire)
        assert first == again
    # A crash after the enqueue and a restart a little later: same fire time, so the same key.
    a = due(HOURLY, UTCZ, T0, T0 + timedelta(seconds=2), "skip")
    b = due(HOURLY, UTCZ, T0, T0 + timedelta(seconds=40), "skip")
    assert a.fire_at == b.fire_at == T0 and fire_key("n", a.fire_at) == fire_key("n", b.fire_at)


def test_due_across_fall_back_counts_each_wall_time_once() -> None:
    spec, stored = parse_cron("*/15 * * * *"), at("2027-10-31 02:00", BERLIN)  # CEST, first pass
    now = at("2027-10-31 03:00", BERLIN)  # CET: 02:00, 02:15, 02:30, 02:45 CEST and 03:00 CET were due
    assert due(spec, BERLIN, stored, now, "run_once") == Due(now, 4, at("2027-10-31 03:15", BERLIN))


def test_a_year_of_downtime_for_a_per_second_schedule_is_cheap() -> None:
    spec = parse_cron("* * * * * *")
    stored, now = at("2027-01-01"), at("2028-01-01")
    began = time.process_time()
    skip, once = due(spec, UTCZ, stored, now, "skip"), due(spec, UTCZ, stored, now, "run_once")
    spent = time.process_time() - began
    year = 365 * 86400 + 1  # both ends included
    assert skip == once == Due(now, year - 1, now + timedelta(seconds=1))
    assert spent < 2.0  # counting one by one would take minutes; this is arithmetic (~tens of ms)
    # In Berlin the hour skipped in March fires once (at 03:00 CEST), the repeated one in October not again.
    berlin = due(spec, BERLIN, stored, now + timedelta(seconds=5, microseconds=3), "skip")
    assert berlin == Due(now + timedelta(seconds=5), year + 5 - 3600 - 1, now + timedelta(seconds=6))


def test_a_per_second_schedule_a_few_seconds_late() -> None:
    spec = parse_cron("*/1 * * * * *")
    now = T0 + timedelta(seconds=3)
    assert due(spec, UTCZ, T0, now, "skip") == Due(now, 3, now + timedelta(seconds=1))
    assert due(spec, UTCZ, T0 + timedelta(seconds=1), T0 + timedelta(seconds=1, milliseconds=400), "skip") == Due(
        T0 + timedelta(seconds=1), 0, T0 + timedelta(seconds=2)
    )


def test_due_refuses_an_unknown_policy() -> None:
    with pytest.raises(ValueError, match="misfire"):
        due(HOURLY, UTCZ, T0, T0, "catch_up")  # type: ignore[arg-type]


# --- keys and clocks ---------------------------------------------------------------------------


def test_fire_key() -> None:
    fire = datetime(2026, 12, 4, 3, 0, tzinfo=BERLIN)
    assert fire_key("nightly", fire) == "schedule:nightly:2026-12-04T02:00:00Z"
    assert fire_key("x", datetime(2026, 12, 4, 2, 0, 0, 999, tzinfo=UTC)) == "schedule:x:2026-12-04T02:00:00Z"
    with pytest.raises(ValueError):
        fire_key("x", datetime(2026, 12, 4))


def test_clocks() -> None:
    now = SystemClock().now()
    assert now.tzinfo is UTC
    clock = ManualClock(at("2027-01-01 01:00", BERLIN))
    assert clock.now() == at("2027-01-01 00:00") and clock.now().tzinfo is UTC
    assert clock.advance(1.5) == at("2027-01-01 00:00:01.5")
    clock.set(at("2030-01-01"))
    assert clock.now() == at("2030-01-01")


def test_spec_is_hashable_and_comparable() -> None:
    assert parse_cron("0 0 * * *") == parse_cron("@daily".replace("@daily", "0 0 * * *"))
    assert isinstance(hash(parse_cron("@daily")), int)
    assert isinstance(parse_cron("@daily"), CronSpec)


# --- cross-checks against brute force ------------------------------------------------------------


def _random_expr(rng) -> str:
    def field(low: int, high: int) -> str:
        kind = rng.randrange(5)
        if kind == 0:
            return "*"
        if kind == 1:
            return f"*/{rng.randint(1, min(high - low, 20))}"
        if kind == 2:
            a = rng.randint(low, high)
            return f"{a}-{rng.randint(a, high)}"
        return ",".join(str(v) for v in sorted(rng.sample(range(low, high + 1), rng.randint(1, 3))))

    hour = "*" if rng.random() < 0.4 else field(0, 23)
    return f"{field(0, 59)} {hour} {field(1, 31)} * {field(0, 6)}"


def _brute_fires(spec: CronSpec, tz, start: datetime, end: datetime) -> list[datetime]:
    """Fire times in (start, end] by the documented rule, minute by minute in real time."""
    from jobq.domain.schedules import _naive

    def matches(wall: datetime) -> bool:
        return spec.day_matches(wall.date()) and wall.hour in spec.hours and wall.minute in spec.minutes

    out, u = [], start.replace(second=0) + timedelta(minutes=1)
    while u <= end:
        local, before = u.astimezone(tz), (u - timedelta(minutes=1)).astimezone(tz)
        wall = _naive(local)
        jump = local.utcoffset() - before.utcoffset()
        if jump > timedelta(0):  # the clocks just went forward: the skipped walls fire now
            skipped = _naive(before) + timedelta(minutes=1)
            if any(matches(skipped + timedelta(minutes=i)) for i in range(int(jump / timedelta(minutes=1)) + 1)):
                out.append(u)
        elif matches(wall) and not (local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()):
            out.append(u)
        u += timedelta(minutes=1)
    return out


@pytest.mark.parametrize("tz", [BERLIN, NEW_YORK, LORD_HOWE], ids=["berlin", "new_york", "lord_howe"])
def test_random_expressions_agree_with_brute_force_around_the_changes(tz) -> None:
    import random

    rng = random.Random(13)
    days = {
        BERLIN: ("2027-03-27", "2027-10-30"),
        NEW_YORK: ("2027-03-13", "2027-11-06"),
        LORD_HOWE: ("2027-04-03", "2027-10-02"),
    }[tz]
    for _ in range(12):
        spec = parse_cron(_random_expr(rng))
        for day in days:
            start = at(f"{day} 12:00", tz) + timedelta(minutes=rng.randrange(60))
            end = start + timedelta(days=2)
            expected = _brute_fires(spec, tz, start, end)
            got = []
            for fire in fire_times(spec, tz, start):
                if fire > end:
                    break
                got.append(fire)
            assert got == expected, spec.expr
            for fire in got:
                assert prev_fire_at_or_before(spec, tz, fire) == fire
                assert prev_fire_at_or_before(spec, tz, fire + timedelta(seconds=59)) == fire


def test_arithmetic_count_agrees_with_counting_one_by_one() -> None:
    import random

    from jobq.domain.schedules import _count_walls, _naive

    rng = random.Random(7)
    for _ in range(40):
        spec = parse_cron(_random_expr(rng))
        start = at("2027-01-01") + timedelta(minutes=rng.randrange(5 * 1440))
        end = start + timedelta(minutes=rng.randrange(4 * 1440))
        exact = 0
        for fire in fire_times(spec, UTCZ, start - timedelta(seconds=1)):
            if fire > end:
                break
            exact += 1
        assert _count_walls(spec, _naive(start), _naive(end)) == exact, (spec.expr, start, end)


# Two days around each clock change of the three zones.
CHANGE_DAYS = [
    ("2027-03-13 11:11", "2027-03-15 07:00"),
    ("2027-03-27 13:00", "2027-03-29"),
    ("2027-04-03", "2027-04-05 01:02"),
    ("2027-10-02", "2027-10-04"),
    ("2027-10-30 05:05:05", "2027-11-01"),
    ("2027-11-06", "2027-11-08"),
]


@pytest.mark.parametrize("tz", [UTCZ, BERLIN, NEW_YORK, LORD_HOWE], ids=["utc", "berlin", "new_york", "lord_howe"])
def test_counting_by_arithmetic_agrees_with_counting_one_by_one(tz) -> None:
    from jobq.domain.schedules import _count_fires

    for expr in ("* * * * *", "*/7 1-3 * * *", "0,30 * * * *", "15,45 */2 * * * *"):
        spec = parse_cron(expr)
        for start_text, end_text in CHANGE_DAYS:
            first = next_fire_after(spec, tz, at(start_text, tz))
            last = prev_fire_at_or_before(spec, tz, at(end_text, tz))
            exact = 0
            for fire in fire_times(spec, tz, first - timedelta(seconds=1)):
                if fire > last:
                    break
                exact += 1
            assert _count_fires(spec, tz, first, last) == exact, (expr, start_text)


def test_many_missed_fires_are_counted_exactly_in_utc() -> None:
    every_minute = parse_cron("* * * * *")
    stored, now = at("2027-06-01 00:00"), at("2027-06-03 00:00:30")  # 2 days: 2881 due, beyond the one-by-one limit
    assert due(every_minute, UTCZ, stored, now, "skip") == Due(at("2027-06-03 00:00"), 2880, at("2027-06-03 00:01"))
