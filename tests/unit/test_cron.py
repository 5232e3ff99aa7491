"""Cron and one-time schedules → EventBridge Scheduler (relayflow.cron).

croniter is the reference. The equivalence table evaluates each produced AWS expression "the
way Scheduler would" without a cron evaluator of our own: the AWS expression is translated
back mechanically (6 → 5 fields, ``?`` → ``*``, AWS day numbers 1-7 → 0-6, names kept) and
evaluated by croniter in the schedule's time zone; a two-schedule split is the union of both
sequences. Scheduler's documented daylight-saving rule (skip a wall time that does not exist,
run a repeated wall time once) is applied on top with ``scheduler_dst_note``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from relayflow.cli.main import main
from relayflow.cron import (
    UnknownTimeZone,
    UnsupportedCron,
    preview,
    schedule_name,
    schedule_name_prefix,
    scheduler_dst_note,
    to_at_expression,
    to_scheduler_expressions,
    zone,
)

# --------------------------------------------------------------------- conversion rules, exact


@pytest.mark.parametrize(
    ("cron", "expected"),
    [
        # neither day field restricted: dom *, dow ?; year always *
        ("* * * * *", ["cron(* * * * ? *)"]),
        ("0 9 * * *", ["cron(0 9 * * ? *)"]),
        # steps: a progression that runs to the field's end becomes start/step
        ("*/15 * * * *", ["cron(0/15 * * * ? *)"]),
        ("5-59/10 * * * *", ["cron(5/10 * * * ? *)"]),
        ("10/20 */6 * * *", ["cron(10/20 0/6 * * ? *)"]),
        ("0 0 */2 * *", ["cron(0 0 1/2 * ? *)"]),
        ("0 0 1 */3 *", ["cron(0 0 1 1/3 ? *)"]),
        # a step that stops early is written out
        ("5-40/10 * * * *", ["cron(5,15,25,35 * * * ? *)"]),
        ("*/30 * * * *", ["cron(0,30 * * * ? *)"]),
        # ranges and lists
        ("0 9-17 * * *", ["cron(0 9-17 * * ? *)"]),
        ("0,30 9,12,18 * * *", ["cron(0,30 9,12,18 * * ? *)"]),
        ("0 0 1,15,30 * *", ["cron(0 0 1,15,30 * ? *)"]),
        ("0 1-2,5-8 * * *", ["cron(0 1,2,5-8 * * ? *)"]),
        ("50-10 * * * *", ["cron(0-10,50-59 * * * ? *)"]),
        # month names, case-insensitive, written as numbers; a wrapping range is a list
        ("0 0 1 jan *", ["cron(0 0 1 1 ? *)"]),
        ("0 0 1 JAN-MAR,Oct *", ["cron(0 0 1 1-3,10 ? *)"]),
        ("0 12 * NOV-FEB *", ["cron(0 12 * 1,2,11,12 ? *)"]),
        # only day-of-week restricted: dom ?, days as AWS names (1 = SUN)
        ("0 9 * * 1-5", ["cron(0 9 ? * MON-FRI *)"]),
        ("0 9 * * mon-fri", ["cron(0 9 ? * MON-FRI *)"]),
        ("0 9 * * 0", ["cron(0 9 ? * SUN *)"]),
        ("0 9 * * 7", ["cron(0 9 ? * SUN *)"]),
        ("0 9 * * 5-7", ["cron(0 9 ? * SUN,FRI,SAT *)"]),
        ("0 9 * * SAT-SUN", ["cron(0 9 ? * SUN,SAT *)"]),
        ("0 9 * * */2", ["cron(0 9 ? * SUN,TUE,THU,SAT *)"]),
        ("0 9 * * 1-5/2", ["cron(0 9 ? * MON,WED,FRI *)"]),
        ("0 9 * * 0-7", ["cron(0 9 * * ? *)"]),
        # only day-of-month restricted: dow ?
        ("0 0 13 * *", ["cron(0 0 13 * ? *)"]),
        ("0 0 29 2 *", ["cron(0 0 29 2 ? *)"]),
        # both restricted: either matches, so two schedules
        ("0 9 1,15 * MON", ["cron(0 9 1,15 * ? *)", "cron(0 9 ? * MON *)"]),
        ("30 8 13 * 5", ["cron(30 8 13 * ? *)", "cron(30 8 ? * FRI *)"]),
        ("0 0 */2 * MON", ["cron(0 0 1/2 * ? *)", "cron(0 0 ? * MON *)"]),
        ("0 6 1-7 JUN 1", ["cron(0 6 1-7 6 ? *)", "cron(0 6 ? 6 MON *)"]),
        # both restricted, but one side is every day (croniter ORs): every day
        ("0 0 1-31 * MON", ["cron(0 0 * * ? *)"]),
        ("0 0 1 * 0-6", ["cron(0 0 * * ? *)"]),
        # both restricted, but the day-of-month side never occurs: only day-of-week
        ("0 0 30 2 MON", ["cron(0 0 ? 2 MON *)"]),
    ],
)
def test_conversion_rules(cron, expected):
    # Given a standard expression / When converted / Then the exact AWS expression(s)
    assert to_scheduler_expressions(cron) == expected


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("", "empty cron expression"),
        ("@reboot", "'@reboot' has no schedule"),
        ("@daily", "write the 5-field form '0 0 * * *'"),
        ("@weekly", "write the 5-field form '0 0 * * 0'"),
        ("0 0 * * * *", "has 6 fields; standard cron has 5"),
        ("0 0 0 * * * 2026", "has 7 fields"),
        ("0 0 *", "has 3 fields"),
        ("0 0 L * *", "day-of-month field 'L': 'L' (last day) is a Quartz extension"),
        ("0 0 LW * *", "'LW' (last weekday) is a Quartz extension"),
        ("0 0 15W * *", "'W' (nearest weekday) is a Quartz extension"),
        ("0 0 * * 5L", "day-of-week field '5L': 'L' (last day)"),
        ("0 0 * * 5#2", "'#' (nth weekday) is a Quartz extension"),
        ("0 0 ? * MON", "'?' is AWS/Quartz syntax; in standard cron write '*'"),
        ("H * * * *", "minute field 'H': 'H' (hashed / random value) is not standard cron"),
        ("0 9 * * MONDAY", "unknown name 'MONDAY' (SUN-SAT)"),
        ("0 9 * FOO *", "unknown name 'FOO' (JAN-DEC)"),
        ("0 9 * MON *", "unknown name 'MON' (JAN-DEC)"),
        ("0 nine * * *", "hour field 'nine': unknown name 'nine'; this field takes numbers only"),
        ("0 9 * * MON-MON", "the range 'MON-MON' has equal ends"),
        ("5-5 * * * *", "the range '5-5' has equal ends"),
        ("0 9 * * 1;2", "allowed are digits, names, and * , - /"),
        ("61 * * * *", "minute field '61' (field 1 of 5): out of range; allowed are 0-59"),
        ("0 24 * * *", "hour field '24' (field 2 of 5): out of range; allowed are 0-23"),
        ("0 0 0 * *", "day-of-month field '0' (field 3 of 5): out of range; allowed are 1-31"),
        ("0 0 1 13 *", "month field '13' (field 4 of 5): out of range; allowed are 1-12"),
        ("*/0 * * * *", "minute field '*/0' (field 1 of 5): step '0' is not allowed"),
        ("0 0 30 2 *", "never fires: day-of-month '30' never falls in month '2'"),
        ("0 0 31 4,6,9,11 *", "never fires"),
    ],
)
def test_refusals_say_why(cron, message):
    # Given an expression that is not standard cron or cannot be expressed
    # When converted / Then UnsupportedCron names the field and the reason
    with pytest.raises(UnsupportedCron) as caught:
        to_scheduler_expressions(cron)
    assert message in str(caught.value)


@pytest.mark.parametrize("cron", ["61 * * * *", "0 24 * * *", "*/0 * * * *", "0 0 * 13 *"])
def test_croniters_own_refusals_name_the_field_counting_from_one(cron):
    # croniter quotes the whole expression and numbers fields from 0 ("in field 0")
    with pytest.raises(UnsupportedCron) as caught:
        to_scheduler_expressions(cron)
    message = str(caught.value)
    assert "field 0" not in message and "in field" not in message
    assert "(field " in message and " of 5)" in message


@pytest.mark.parametrize(
    ("tz", "name"),
    [("utc", "UTC"), ("UTC", "UTC"), ("Etc/UTC", "Etc/UTC"), ("europe/berlin", "Europe/Berlin")],
)
def test_time_zones_are_matched_without_case_and_named_as_the_database_does(tz, name):
    from relayflow.cron import zone_name

    # Given a zone written in any case / Then it is the database's spelling, and it resolves
    assert zone_name(tz) == name
    assert str(zone(tz)) == name
    assert preview("0 9 * * *", tz, 1, datetime(2026, 1, 1))[0].utcoffset() is not None


def test_refusals_are_value_errors_and_preview_refuses_the_same():
    assert issubclass(UnsupportedCron, ValueError)
    with pytest.raises(UnsupportedCron):
        preview("0 0 L * *", "UTC", 3)


def test_expressions_stay_within_aws_length_limit():
    # Given the longest kind of list (every other minute, hour and day, but not as a step)
    cron = "0-58/2,59 1-21/2,22 1-29/2,30 1-11/2,12 *"
    # When converted / Then it stays within 256 characters
    (expression,) = to_scheduler_expressions(cron)
    assert len(expression) <= 256


# ------------------------------------------------------------------ mechanical back-translation

_AWS_WILDCARDS = {  # per field, the characters the Scheduler cron table allows (User Guide)
    0: set("0123456789,-*/"),
    1: set("0123456789,-*/"),
    2: set("0123456789,-*?/LW"),
    3: set("0123456789,-*/JANFEBMRPYULGSOCTVD"),
    4: set("1234567,-*?L#SUNMOTEWDHFRIA"),
    5: set("0123456789,-*/"),
}


def aws_to_croniter(expression: str) -> str:
    """A produced AWS expression as croniter input, mechanically, checking AWS's rules."""
    match = re.fullmatch(r"cron\((.+)\)", expression)
    assert match, expression
    fields = match.group(1).split(" ")
    assert len(fields) == 6 and len(expression) <= 256
    for index, text in enumerate(fields):
        assert set(text) <= _AWS_WILDCARDS[index], (expression, text)
    minute, hour, dom, month, dow, year = fields
    assert year == "*"
    assert (dom == "?") != (dow == "?"), "AWS needs ? in exactly one day field"
    dom = "*" if dom == "?" else dom
    dow = "*" if dow == "?" else re.sub(r"\d", lambda d: str(int(d.group()) - 1), dow)
    return " ".join([minute, hour, dom, month, dow])


def fires(
    expression: str, start: datetime, limit: int, until: datetime, at_least: int = 0
) -> list[datetime]:
    """croniter's fire times after ``start``: at most ``limit``, none after ``until`` once
    ``at_least`` were found (so that rare schedules are still compared a few times)."""
    it = croniter(expression, start)
    out: list[datetime] = []
    while len(out) < limit:
        fire = it.get_next(datetime)
        # In UTC: two times of one zone compare by wall clock, ignoring fold (PEP 495).
        if fire.astimezone(UTC) > until.astimezone(UTC) and len(out) >= at_least:
            break
        out.append(fire)
    return out


def scheduler_fires(
    aws_expressions: list[str], start: datetime, limit: int, until: datetime, *, dst_rule: bool
) -> list[datetime]:
    """The union of every schedule's fire times up to ``until`` (one instant, one run), each
    schedule evaluated on its own, with Scheduler's DST rule when ``dst_rule``."""
    union: dict[datetime, datetime] = {}
    for aws in aws_expressions:
        expression = aws_to_croniter(aws)
        for fire in fires(expression, start, limit, until):
            if not (dst_rule and scheduler_dst_note(expression, fire)):
                union.setdefault(fire.astimezone(UTC), fire)
    return [union[k] for k in sorted(union)][:limit]


def dst_filtered(cron: str, times: list[datetime]) -> list[datetime]:
    return [t for t in times if scheduler_dst_note(cron, t) is None]


TABLE = [
    "* * * * *",
    "*/15 * * * *",
    "5-59/10 * * * *",
    "0 * * * *",
    "15,45 */3 * * *",
    "*/7 */5 * * *",
    "50-10 * * * *",
    "30 2 * * *",
    "0 2 * * *",
    "0 3 * * *",
    "45 1 * * *",
    "15 2,3 * * *",
    "0,30 9-17 * * MON-FRI",
    "0 9 * * 1-5",
    "0 9 * * mon,wed,fri",
    "0 22 * * 0",
    "0 22 * * 7",
    "0 12 * * 5-7",
    "0 12 * * SAT-SUN",
    "0 12 * * */2",
    "0 12 * * 1-5/2",
    "0 0 1 * *",
    "0 0 1,15,30 * *",
    "0 0 */2 * *",
    "0 0 10-20 * *",
    "0 0 31 * *",
    "0 6 1 * MON",
    "30 8 13 * 5",
    "0 0 1-7 * 1",
    "0 0 */2 * MON",
    "0 0 1-31 * MON",
    "0 0 1 * 0-6",
    "0 0 30 2 MON",
    "0 0 1 jan *",
    "0 0 1 JAN-MAR,OCT *",
    "0 0 15 */3 *",
    "0 12 * NOV-FEB *",
    "59 23 31 12 *",
    "0 0 29 2 *",
]

WINDOWS = [  # (zone, local start): the DST days start their window at midnight
    ("UTC", datetime(2026, 1, 1)),
    ("Europe/Berlin", datetime(2026, 3, 29)),  # 02:00 → 03:00
    ("Europe/Berlin", datetime(2026, 10, 25)),  # 03:00 → 02:00
    ("America/New_York", datetime(2026, 3, 8)),  # 02:00 → 03:00
    ("America/New_York", datetime(2026, 11, 1)),  # 02:00 → 01:00
    ("Asia/Kolkata", datetime(2026, 2, 27)),  # no DST, +05:30
    ("Australia/Lord_Howe", datetime(2026, 4, 5)),  # 02:00 → 01:30 (30-minute DST)
    ("Australia/Lord_Howe", datetime(2026, 10, 4)),  # 02:00 → 02:30
    ("Pacific/Chatham", datetime(2026, 9, 27)),  # 02:45 → 03:45, +12:45 / +13:45
]


def test_table_is_large_enough():
    assert len(TABLE) >= 30 and len({tz for tz, _ in WINDOWS}) >= 5


@pytest.mark.parametrize("cron", TABLE)
@pytest.mark.parametrize(("tz", "local_start"), WINDOWS, ids=lambda w: str(w))
def test_scheduler_fires_exactly_when_croniter_does(cron, tz, local_start):
    # Given a standard expression, a zone and a window opening on a transition day
    start = local_start.replace(tzinfo=ZoneInfo(tz)) - timedelta(seconds=1)
    until = start + timedelta(days=40)
    # When croniter evaluates the original (the next 50, or the 40-day window, at least 3)
    want = fires(cron, start, 50, until, at_least=3)
    # and the AWS expressions are evaluated the way Scheduler would, up to the same time
    aws = to_scheduler_expressions(cron)
    got = scheduler_fires(aws, start, 50, want[-1], dst_rule=False)
    # Then the fire times are the same instants
    assert _utc(got) == _utc(want)
    # and with Scheduler's DST rule applied to each schedule, the same runs remain
    got_dst = scheduler_fires(aws, start, 50, want[-1], dst_rule=True)
    assert _utc(got_dst) == _utc(dst_filtered(cron, want))


def _utc(times: list[datetime]) -> list[datetime]:
    return [t.astimezone(UTC) for t in times]


# ------------------------------------------------------------------------------- DST behaviour


def _iso(times: list[datetime]) -> list[str]:
    return [t.isoformat() for t in times]


def test_spring_forward_croniter_moves_a_missing_time_to_the_end_of_the_gap():
    # Given 02:30 daily in Berlin, and 2026-03-29 when 02:00 jumps to 03:00
    times = preview("30 2 * * *", "Europe/Berlin", 3, datetime(2026, 3, 28))
    # Then croniter fires once at 03:00 (a wall time the expression does not name)
    assert _iso(times) == [
        "2026-03-28T02:30:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
    ]
    # and Scheduler, which skips a wall time that does not exist, does not fire that day
    notes = [scheduler_dst_note("30 2 * * *", t) for t in times]
    assert notes[0] is None and notes[2] is None
    assert "Scheduler skips it" in notes[1]


def test_spring_forward_slots_inside_the_gap_collapse_into_one_run():
    times = preview("*/30 * * * *", "Europe/Berlin", 4, datetime(2026, 3, 29, 1, 0))
    assert _iso(times) == [
        "2026-03-29T01:30:00+01:00",
        "2026-03-29T03:00:00+02:00",  # 02:00 and 02:30 do not exist; 03:00 is a real slot
        "2026-03-29T03:30:00+02:00",
        "2026-03-29T04:00:00+02:00",
    ]
    assert [scheduler_dst_note("*/30 * * * *", t) for t in times] == [None] * 4


@pytest.mark.parametrize(
    ("cron", "tz", "start", "expected_croniter", "skipped"),
    [
        (
            "30 2 * * *",
            "America/New_York",
            datetime(2026, 3, 8),
            ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"],
            ["2026-03-08T03:00:00-04:00"],
        ),
        (
            "15 2 * * *",
            "Australia/Lord_Howe",
            datetime(2026, 10, 4),
            ["2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"],
            ["2026-10-04T02:30:00+11:00"],
        ),
        (
            "0 3 * * *",
            "Pacific/Chatham",
            datetime(2026, 9, 27),
            ["2026-09-27T03:45:00+13:45", "2026-09-28T03:00:00+13:45"],
            ["2026-09-27T03:45:00+13:45"],
        ),
        (
            "30 1 * * *",
            "America/New_York",
            datetime(2026, 11, 1),
            ["2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00"],
            ["2026-11-01T01:30:00-05:00"],
        ),
        (
            "45 1 * * *",
            "Australia/Lord_Howe",
            datetime(2026, 4, 5),
            ["2026-04-05T01:45:00+11:00", "2026-04-05T01:45:00+10:30"],
            ["2026-04-05T01:45:00+10:30"],
        ),
        (
            "0 3 * * *",
            "Pacific/Chatham",
            datetime(2026, 4, 5),
            ["2026-04-05T03:00:00+13:45", "2026-04-05T03:00:00+12:45"],
            ["2026-04-05T03:00:00+12:45"],
        ),
        (
            "30 2 * * *",
            "Asia/Kolkata",
            datetime(2026, 3, 29),
            ["2026-03-29T02:30:00+05:30", "2026-03-30T02:30:00+05:30"],
            [],
        ),
        (
            "30 2 * * *",
            "UTC",
            datetime(2026, 3, 29),
            ["2026-03-29T02:30:00+00:00", "2026-03-30T02:30:00+00:00"],
            [],
        ),
    ],
)
def test_dst_transitions_croniter_and_scheduler(cron, tz, start, expected_croniter, skipped):
    # Given a transition day / When previewed / Then croniter's times, and the runs
    # Scheduler does not make (gap: skipped; overlap: only the first occurrence runs)
    times = preview(cron, tz, 2, start)
    assert _iso(times) == expected_croniter
    assert [t.isoformat() for t in times if scheduler_dst_note(cron, t)] == skipped


def test_fall_back_croniter_fires_a_repeated_time_twice_scheduler_once():
    times = preview("30 2 * * *", "Europe/Berlin", 3, datetime(2026, 10, 24, 12, 0))
    assert _iso(times) == [
        "2026-10-25T02:30:00+02:00",
        "2026-10-25T02:30:00+01:00",
        "2026-10-26T02:30:00+01:00",
    ]
    assert [scheduler_dst_note("30 2 * * *", t) is None for t in times] == [True, False, True]
    hourly = preview("0 * * * *", "Europe/Berlin", 4, datetime(2026, 10, 25, 0, 30))
    assert _iso(dst_filtered("0 * * * *", hourly)) == [
        "2026-10-25T01:00:00+02:00",
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T03:00:00+01:00",
    ]


# -------------------------------------------------------------------------------------- preview


def test_preview_returns_aware_times_in_the_zone_after_start():
    # Given an aware start in UTC / When previewed in Kolkata
    times = preview("0 9 * * MON-FRI", "Asia/Kolkata", 3, datetime(2026, 6, 5, 3, 30, tzinfo=UTC))
    # Then strictly after the start (09:00 local is 03:30 UTC), in Kolkata time
    assert _iso(times) == [
        "2026-06-08T09:00:00+05:30",
        "2026-06-09T09:00:00+05:30",
        "2026-06-10T09:00:00+05:30",
    ]
    assert all(t.tzinfo == ZoneInfo("Asia/Kolkata") for t in times)


def test_preview_defaults_to_now_and_refuses_unknown_zones():
    times = preview("* * * * *", "UTC", 2)
    assert datetime.now(UTC) < times[0] <= datetime.now(UTC) + timedelta(minutes=1)
    with pytest.raises(UnknownTimeZone, match="unknown time zone 'Mars/Olympus'"):
        preview("* * * * *", "Mars/Olympus", 2)


# ------------------------------------------------------------------------------ at() schedules


@pytest.mark.parametrize(
    ("at", "tz", "expected"),
    [
        (datetime(2026, 5, 1, 9, 30, 15, 999), "Europe/Berlin", "at(2026-05-01T09:30:15)"),
        (datetime(2026, 5, 1, 7, 30, tzinfo=UTC), "Europe/Berlin", "at(2026-05-01T09:30:00)"),
        (datetime(2026, 1, 1, 0, 0, tzinfo=UTC), "America/New_York", "at(2025-12-31T19:00:00)"),
        (datetime(2026, 1, 1, 0, 0, tzinfo=UTC), "Asia/Kolkata", "at(2026-01-01T05:30:00)"),
        (datetime(2026, 10, 25, 0, 30, tzinfo=UTC), "UTC", "at(2026-10-25T00:30:00)"),
        (datetime(2026, 3, 29, 1, 30, tzinfo=UTC), "Europe/Berlin", "at(2026-03-29T03:30:00)"),
    ],
)
def test_at_expression_is_the_wall_time_in_the_zone(at, tz, expected):
    assert to_at_expression(at, tz) == expected


@pytest.mark.parametrize(
    ("at", "message"),
    [
        (datetime(2026, 3, 29, 2, 30), "does not exist in Europe/Berlin"),
        (datetime(2026, 10, 25, 2, 30), "occurs twice in Europe/Berlin"),
        (datetime(2026, 10, 25, 0, 30, tzinfo=UTC), "occurs twice in Europe/Berlin"),
    ],
)
def test_at_expression_refuses_wall_times_a_transition_makes_ambiguous(at, message):
    with pytest.raises(ValueError, match=message):
        to_at_expression(at, "Europe/Berlin")


def test_at_expression_refuses_unknown_zones():
    with pytest.raises(UnknownTimeZone):
        to_at_expression(datetime(2026, 1, 1), "Nowhere/City")


# ------------------------------------------------------------------------------ schedule names


def test_schedule_names_are_deterministic_short_and_distinct():
    name = schedule_name("acme", "daily-report", 0, 1)
    assert name == schedule_name("acme", "daily-report", 0, 1)
    assert name.startswith(schedule_name_prefix("acme", "daily-report"))
    assert re.fullmatch(r"acme\.daily-report\.[0-9a-f]{10}\.0\.1", name)
    long = schedule_name("t" * 100, "w/ü" * 100, 9999, 1)
    assert len(long) <= 64 and re.fullmatch(r"[0-9A-Za-z_.-]+", long)
    # sanitising or cutting never makes two workflows share names
    pairs = [("a", "b.c"), ("a", "b_c"), ("a.b", "c"), ("a", "b" * 90 + "x"), ("a", "b" * 90 + "y")]
    names = {schedule_name(tenant, wf, 0, 0) for tenant, wf in pairs}
    assert len(names) == 5
    with pytest.raises(ValueError):
        schedule_name("a", "b", 0, 2)


# --------------------------------------------------------------------------------------- CLI


def test_cli_preview_prints_times_and_the_aws_expressions(capsys):
    # Given / When
    code = main(
        [
            "schedule",
            "preview",
            "0 9 1,15 * MON",
            "--tz",
            "Europe/Berlin",
            "-n",
            "3",
            "--start",
            "2026-06-01T09:00",
        ]
    )
    # Then
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out == [
        "EventBridge Scheduler expressions (either fires), ScheduleExpressionTimezone "
        "Europe/Berlin:",
        "  cron(0 9 1,15 * ? *)",
        "  cron(0 9 ? * MON *)",
        "next 3 fire times (croniter):",
        "  2026-06-08T09:00:00+02:00",
        "  2026-06-15T09:00:00+02:00",
        "  2026-06-22T09:00:00+02:00",
    ]


def test_cli_preview_marks_runs_scheduler_does_not_make(capsys):
    code = main(
        [
            "schedule",
            "preview",
            "30 2 * * *",
            "--tz",
            "Europe/Berlin",
            "-n",
            "2",
            "--start",
            "2026-03-28T12:00",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "  cron(30 2 * * ? *)\n" in out
    assert "  2026-03-29T03:00:00+02:00  ! " in out and "Scheduler skips it" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["0 0 L * *"], "'L' (last day) is a Quartz extension"),
        (["0 0 * * * *"], "has 6 fields"),
        (["@reboot"], "'@reboot' has no schedule"),
        (["0 9 * * *", "--tz", "Mars/Olympus"], "unknown time zone 'Mars/Olympus'"),
        (["0 9 * * *", "-n", "0"], "-n must be at least 1"),
        (["0 9 * * *", "--start", "tomorrow"], "not an ISO 8601 date-time"),
    ],
)
def test_cli_preview_exits_2_with_the_reason(capsys, args, message):
    code = main(["schedule", "preview", *args])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert message in captured.err
