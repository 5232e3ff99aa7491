"""Cron and one-time schedules, mapped to EventBridge Scheduler expressions.

A workflow declares standard 5-field cron (``minute hour day-of-month month day-of-week``) in
an IANA time zone. croniter is the reference for what such an expression means: this module
asks croniter for the set of values each field selects and writes those sets in AWS's 6-field
syntax, so the AWS expression selects exactly the same minutes. It never evaluates a schedule
itself. The rules, and what EventBridge Scheduler does on daylight-saving transitions, are in
docs/schedules.md.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

#: ``ScheduleExpression`` is at most 256 characters (CreateSchedule API reference).
MAX_EXPRESSION_LENGTH = 256
#: Schedule names: 1-64 characters of ``[0-9a-zA-Z-_.]`` (CreateSchedule API reference).
MAX_NAME_LENGTH = 64
_MAX_TRIGGERS = 10_000

_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
#: AWS day-of-week names; croniter's number for a day (0 = Sunday) is its index here.
AWS_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
# (name, lowest, highest) of the five standard fields, in order.
_FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day-of-month", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 0, 6),
)
_NAMES = {3: frozenset(_MONTHS), 4: frozenset(AWS_DAYS)}
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_ALLOWED = re.compile(r"[0-9A-Za-z*,/-]+")
_EQUAL_RANGE = re.compile(r"(?:^|,)([0-9A-Za-z]+)-\1(?:/|,|$)", re.IGNORECASE)
_NAME_SAFE = re.compile(r"[^0-9A-Za-z_-]+")


class UnsupportedCron(ValueError):
    """The expression is not standard 5-field cron, or EventBridge Scheduler cannot express
    it exactly. The message says which field and what to write instead."""


class UnknownTimeZone(ValueError):
    """Not an IANA time zone name known to this Python's zone database."""


def zone_name(tz: str) -> str:
    """The IANA name of ``tz`` as the zone database spells it: names are matched without
    regard to case (``utc`` is ``UTC``, ``europe/berlin`` is ``Europe/Berlin``), so what
    EventBridge Scheduler receives is always a name it knows. :class:`UnknownTimeZone` when
    there is no such zone."""
    if isinstance(tz, str):
        names = _zone_names()
        if tz in names.values():
            return tz
        found = names.get(tz.lower())
        if found is not None:
            return found
    raise UnknownTimeZone(
        f"unknown time zone '{tz}' (use an IANA name such as Europe/Berlin or UTC)"
    )


@lru_cache(maxsize=1)
def _zone_names() -> dict[str, str]:
    from zoneinfo import available_timezones

    return {name.lower(): name for name in available_timezones()}


def zone(tz: str) -> ZoneInfo:
    """The IANA zone ``tz`` (any case, see :func:`zone_name`); :class:`UnknownTimeZone` when
    there is no such zone."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(zone_name(tz))
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise UnknownTimeZone(
            f"unknown time zone '{tz}' (use an IANA name such as Europe/Berlin or UTC)"
        ) from exc


# ------------------------------------------------------------------------------ checking input


def _refusal(cron: str, field: str, text: str, reason: str) -> UnsupportedCron:
    return UnsupportedCron(f"cron '{cron}': {field} field '{text}': {reason}")


def _check_field(cron: str, index: int, text: str) -> None:
    """Refuse the non-standard extensions croniter would otherwise accept (L, W, #, H, ?)."""
    field = _FIELDS[index][0]
    if "#" in text:
        raise _refusal(
            cron, field, text, "'#' (nth weekday) is a Quartz extension, not standard cron"
        )
    if "?" in text:
        raise _refusal(cron, field, text, "'?' is AWS/Quartz syntax; in standard cron write '*'")
    if not _ALLOWED.fullmatch(text):
        raise _refusal(cron, field, text, "allowed are digits, names, and * , - /")
    for word in re.findall(r"[A-Za-z]+", text):
        upper = word.upper()
        if upper in _NAMES.get(index, ()):
            continue
        if upper in {"L", "W", "LW"}:
            meaning = {"L": "last day", "W": "nearest weekday", "LW": "last weekday"}[upper]
            raise _refusal(
                cron, field, text, f"'{word}' ({meaning}) is a Quartz extension, not standard cron"
            )
        if upper in {"H", "R"}:
            raise _refusal(
                cron, field, text, f"'{word}' (hashed / random value) is not standard cron"
            )
        allowed = {3: " (JAN-DEC)", 4: " (SUN-SAT)"}.get(index, "; this field takes numbers only")
        raise _refusal(cron, field, text, f"unknown name '{word}'{allowed}")
    equal = _EQUAL_RANGE.search(text)
    if equal:
        value = equal.group(1)
        raise _refusal(
            cron,
            field,
            text,
            f"the range '{value}-{value}' has equal ends; croniter reads that as the whole "
            f"cycle and classic cron as the single value, so write '{value}' or '*'",
        )


def cron_fields(cron: str) -> list[str]:
    if not isinstance(cron, str) or not cron.strip():
        raise UnsupportedCron(
            "empty cron expression (expected minute hour day-of-month month day-of-week)"
        )
    text = cron.strip()
    if text.startswith("@"):
        macro = text.lower()
        if macro == "@reboot":
            raise UnsupportedCron("cron '@reboot' has no schedule: it runs when a machine boots")
        if macro in _MACROS:
            raise UnsupportedCron(
                f"cron '{text}' is a shorthand; write the 5-field form '{_MACROS[macro]}'"
            )
        raise UnsupportedCron(f"cron '{text}' is not a cron expression")
    fields = re.split(r"[ \t]+", text)
    if len(fields) != 5:
        extra = (
            "; a 6th field (seconds or year) is not standard cron — Relayflow sets AWS's year "
            "field to *"
            if len(fields) in (6, 7)
            else ""
        )
        raise UnsupportedCron(
            f"cron '{cron}' has {len(fields)} fields; standard cron has 5 (minute hour "
            f"day-of-month month day-of-week){extra}"
        )
    for index, field in enumerate(fields):
        _check_field(cron, index, field)
    return fields


def _expand(cron: str) -> tuple[list[str], list[list[int] | None]]:
    """The fields as written and, per field, the sorted values croniter selects (``None``
    for croniter's ``*``: unrestricted)."""
    from croniter import CroniterError, croniter

    fields = cron_fields(cron)
    try:
        expanded, nth = croniter.expand(" ".join(fields))
    except CroniterError as exc:
        raise _field_refusal(cron, fields, exc) from exc
    if nth:  # defensive: '#' and 'L' were refused above
        raise UnsupportedCron(f"cron '{cron}': nth-weekday syntax is not standard cron")
    sets: list[list[int] | None] = []
    for values in expanded:
        if values == ["*"]:
            sets.append(None)
        elif all(isinstance(v, int) for v in values):
            sets.append(sorted({int(v) for v in values}))
        else:  # defensive: 'l' (last day) was refused above
            raise UnsupportedCron(f"cron '{cron}': 'L' is not standard cron")
    return fields, sets


def _field_refusal(cron: str, fields: list[str], exc: Exception) -> UnsupportedCron:
    """croniter's refusal, with the field it is about named: croniter's messages quote the
    whole expression and count fields from 0, so each field is tried alone to find it."""
    from croniter import CroniterError, croniter

    for index, text in enumerate(fields):
        probe = ["*"] * len(fields)
        probe[index] = text
        try:
            croniter.expand(" ".join(probe))
        except CroniterError as alone:
            name, low, high = _FIELDS[index]
            reason = _croniter_reason(alone, " ".join(probe))
            return UnsupportedCron(
                f"cron '{cron}': {name} field '{text}' (field {index + 1} of 5): {reason}; "
                f"allowed are {low}-{high}"
            )
    return UnsupportedCron(f"cron '{cron}' is not valid: {_croniter_reason(exc, cron)}")


def _croniter_reason(exc: Exception, expression: str) -> str:
    """croniter's message without the expression it quotes or its 0-based field index."""
    text = str(exc).strip().splitlines()[-1] if str(exc).strip() else ""
    if "out of range" in text or "out of bands" in text:
        return "out of range"
    text = text.replace(f"[{expression}]", "").replace(expression, "")
    text = re.sub(r"\s*in field \d+", "", text).replace(" is not acceptable", " is not allowed")
    return " ".join(text.split()) or type(exc).__name__


def _never_fires(dom: str, month: str) -> str | None:
    """Why ``dom`` never occurs in ``month`` (e.g. the 30th of February), or ``None``;
    croniter's strict check decides (it allows the 29th of February)."""
    from croniter import CroniterError, croniter

    try:
        croniter.expand(f"0 0 {dom} {month} *", strict=True)
    except CroniterError:
        return f"day-of-month '{dom}' never falls in month '{month}'"
    return None


# --------------------------------------------------------------------------- writing AWS fields


def _runs(values: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for value in values:
        if runs and value == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], value)
        else:
            runs.append((value, value))
    return runs


def _render(values: list[int], high: int, name: tuple[str, ...] | None = None) -> str:
    """A value set in AWS syntax: ``a/k`` for a progression that runs to the field's end
    (AWS: "1/10 … every tenth minute, starting from the first"), else ranges of three or more
    consecutive values and single values, comma-separated. Day-of-week takes no ``/`` in AWS,
    so it is always written with names, ranges and lists."""

    def word(value: int) -> str:
        return name[value] if name else str(value)

    if name is None and len(values) >= 3:
        step = values[1] - values[0]
        if (
            step > 1
            and all(b - a == step for a, b in itertools.pairwise(values))
            and values[-1] + step > high
        ):
            return f"{values[0]}/{step}"
    parts: list[str] = []
    for first, last in _runs(values):
        if last - first >= 2:
            parts.append(f"{word(first)}-{word(last)}")
        else:
            parts.extend(word(v) for v in range(first, last + 1))
    return ",".join(parts)


def _is_full(values: list[int], index: int) -> bool:
    _, low, high = _FIELDS[index]
    return len(values) == high - low + 1


def to_scheduler_expressions(cron: str) -> list[str]:
    """The EventBridge Scheduler expression(s) that fire exactly when croniter fires ``cron``.

    One ``cron(min hour dom month dow *)`` string, or two when both day-of-month and
    day-of-week are restricted: standard cron fires when *either* matches, AWS needs ``?`` in
    one of them, so the first schedule carries the day-of-month (day-of-week ``?``) and the
    second the day-of-week (day-of-month ``?``). On a day both match, both fire at the same
    minute; the run's idempotency key (``schedule:<index>:<scheduled time>``) makes that one
    run. Day-of-week is written with AWS names (``SUN``-``SAT``), month with numbers.

    Raises :class:`UnsupportedCron` for anything that is not standard 5-field cron, that never
    fires, or that does not fit AWS's 256 characters.
    """
    fields, sets = _expand(cron)
    minute, hour, dom, month, dow = sets
    head = [
        "*" if minute is None else _render(minute, 59),
        "*" if hour is None else _render(hour, 23),
    ]
    month_text = "*" if month is None else _render(month, 12)
    dom_text = None if dom is None else _render(dom, 31)
    dow_text = None if dow is None else _render(dow, 6, AWS_DAYS)

    days: list[tuple[str, str]]
    if dom is not None and dow is not None:
        # croniter ORs the two fields. A field that selects every day makes that "every day".
        if _is_full(dom, 2) or _is_full(dow, 4):
            days = [("*", "?")]
        elif _never_fires(fields[2], fields[3]):
            days = [("?", str(dow_text))]  # the day-of-month side contributes no date
        else:
            days = [(str(dom_text), "?"), ("?", str(dow_text))]
    elif dom is not None:
        reason = _never_fires(fields[2], fields[3])
        if reason:
            raise UnsupportedCron(f"cron '{cron}' never fires: {reason}")
        days = [(str(dom_text), "?")]
    elif dow is not None:
        days = [("?", str(dow_text))]
    else:
        days = [("*", "?")]

    expressions = [f"cron({' '.join([*head, d, month_text, w, '*'])})" for d, w in days]
    for expression in expressions:
        if len(expression) > MAX_EXPRESSION_LENGTH:
            raise UnsupportedCron(
                f"cron '{cron}' becomes {expression[:40]}… ({len(expression)} characters); "
                f"EventBridge Scheduler accepts at most {MAX_EXPRESSION_LENGTH}"
            )
    return expressions


# ------------------------------------------------------------------------------------- preview


def preview(cron: str, tz: str, n: int = 10, start: datetime | None = None) -> list[datetime]:
    """The next ``n`` fire times of ``cron`` in ``tz`` after ``start`` (default: now), as
    aware datetimes in ``tz``, computed by croniter.

    A naive ``start`` is a wall time in ``tz``. Refuses what :func:`to_scheduler_expressions`
    refuses. On daylight-saving transition days croniter and EventBridge Scheduler differ:
    see :func:`scheduler_dst_note`.
    """
    from croniter import CroniterBadDateError, croniter

    to_scheduler_expressions(cron)
    where = zone(tz)
    if start is None:
        start = datetime.now(where)
    start = start.replace(tzinfo=where) if start.tzinfo is None else start.astimezone(where)
    it = croniter(" ".join(cron_fields(cron)), start)
    try:
        return [it.get_next(datetime).astimezone(where) for _ in range(n)]
    except CroniterBadDateError as exc:  # defensive: impossible dates were refused above
        raise UnsupportedCron(f"cron '{cron}' never fires") from exc


def scheduler_dst_note(cron: str, fire: datetime) -> str | None:
    """Why EventBridge Scheduler does *not* fire at ``fire``, a time :func:`preview` returned,
    or ``None`` when it does.

    Scheduler's documented rule ("Daylight savings time on EventBridge Scheduler"): a wall
    time that does not exist (clocks spring forward) is skipped; a wall time that occurs twice
    (clocks fall back) runs once, at its first occurrence. croniter instead fires once at the
    end of a gap, at a wall time the expression may not name, and fires both occurrences of a
    repeated wall time.
    """
    from croniter import croniter

    wall = fire.replace(tzinfo=None)
    if not croniter.match(" ".join(cron_fields(cron)), wall):
        return (
            f"{fire:%H:%M} is not a time the expression names: croniter moved a run from a "
            "wall time that does not exist (clocks went forward); Scheduler skips it"
        )
    if fire.tzinfo is not None and fire.fold == 1:
        first = fire.replace(fold=0)
        if first.utcoffset() != fire.utcoffset():
            return (
                f"{fire:%H:%M} occurs twice (clocks went back) and this is the second time; "
                "Scheduler runs it only the first time"
            )
    return None


# ------------------------------------------------------------------------------- one-time (at)


def to_at_expression(at: datetime, tz: str) -> str:
    """``at(yyyy-mm-ddThh:mm:ss)``: the wall time of ``at`` in ``tz``, the schedule's
    ``ScheduleExpressionTimezone``. A naive ``at`` is already a wall time in ``tz``; an aware
    one is converted. Seconds are kept, fractions dropped (Scheduler fires within the minute).

    Raises ``ValueError`` when that wall time does not exist in ``tz`` or occurs twice there
    (a daylight-saving transition): ``at()`` cannot say which instant is meant, and
    Scheduler's documentation does not say what it does with such a time.
    """
    where = zone(tz)
    if at.tzinfo is None:
        wall = at.replace(microsecond=0)
        local = wall.replace(tzinfo=where)
        if local.astimezone(UTC).astimezone(where).replace(tzinfo=None) != wall:
            raise ValueError(
                f"{wall.isoformat()} does not exist in {tz} (clocks go forward then); "
                "choose another time"
            )
    else:
        local = at.astimezone(where).replace(microsecond=0)
        wall = local.replace(tzinfo=None)
    if local.replace(fold=0).utcoffset() != local.replace(fold=1).utcoffset():
        raise ValueError(
            f"{wall.isoformat()} occurs twice in {tz} (clocks go back then), so at() cannot "
            "name one instant; give the time in UTC (timezone: UTC) instead"
        )
    return f"at({wall:%Y-%m-%dT%H:%M:%S})"


# ------------------------------------------------------------------------------------- naming


def schedule_name_prefix(tenant: str, workflow_id: str) -> str:
    """What every schedule name of one workflow starts with (for ``ListSchedules``
    ``NamePrefix``): readable ids, cut to fit, and a digest of the exact pair so that two
    workflows never share a prefix."""
    digest = hashlib.sha256(f"{tenant}\x00{workflow_id}".encode()).hexdigest()[:10]
    # Room for ".<digest>." and the longest suffix "<index>.<part>" (4 + 1 + 1 characters).
    room = MAX_NAME_LENGTH - len(digest) - 2 - 6 - 1
    t = _NAME_SAFE.sub("_", tenant)
    w = _NAME_SAFE.sub("_", workflow_id)
    t = t[: max(room // 3, room - len(w))]
    w = w[: room - len(t)]
    return f"{t}.{w}.{digest}."


def schedule_name(tenant: str, workflow_id: str, index: int, part: int) -> str:
    """The deterministic EventBridge Scheduler name (≤ 64 characters) of part ``part`` (0 or
    1, the position in :func:`to_scheduler_expressions`) of trigger ``index`` of a workflow."""
    if not 0 <= index < _MAX_TRIGGERS or part not in (0, 1):
        raise ValueError(f"trigger index {index} / part {part} out of range")
    return f"{schedule_name_prefix(tenant, workflow_id)}{index}.{part}"
