"""``relayflow schedule preview``: a cron expression's next fire times and its EventBridge
Scheduler form."""

from __future__ import annotations

import argparse
from typing import Any

from relayflow.cli import json_docs
from relayflow.cli.output import EXIT_OK, UsageError, print_json
from relayflow.cli.parsing import command_group


def cmd_schedule_preview(args: argparse.Namespace) -> int:
    from datetime import datetime

    from relayflow.cron import (
        UnknownTimeZone,
        UnsupportedCron,
        preview,
        scheduler_dst_note,
        to_scheduler_expressions,
        zone_name,
    )

    if args.n < 1:
        raise UsageError("-n must be at least 1")
    try:
        start = datetime.fromisoformat(args.start) if args.start else None
    except ValueError as exc:
        raise UsageError(f"--start {args.start}: not an ISO 8601 date-time") from exc
    try:
        expressions = to_scheduler_expressions(args.cron)
        tz = zone_name(args.tz)
        times = preview(args.cron, tz, args.n, start)
    except (UnsupportedCron, UnknownTimeZone) as exc:
        raise UsageError(str(exc)) from exc
    if args.json:
        notes = [scheduler_dst_note(args.cron, t) for t in times]
        print_json(json_docs.schedule(args.cron, tz, expressions, times, notes))
        return EXIT_OK
    plural = "s (either fires)" if len(expressions) > 1 else ""
    print(f"EventBridge Scheduler expression{plural}, ScheduleExpressionTimezone {tz}:")
    for expression in expressions:
        print(f"  {expression}")
    print(f"next {len(times)} fire times (croniter):")
    for fire_time in times:
        note = scheduler_dst_note(args.cron, fire_time)
        print(f"  {fire_time.isoformat()}" + (f"  ! {note}" if note else ""))
    return EXIT_OK


def add_schedule_commands(sub: Any) -> None:
    """``relayflow schedule preview``."""
    schedule = command_group(sub, "schedule", "cron schedules")
    p = schedule.add_parser(
        "preview", help="next fire times of a cron expression and its EventBridge Scheduler form"
    )
    p.add_argument("cron", help='standard 5-field cron, e.g. "0 9 * * MON-FRI"')
    p.add_argument("--tz", default="UTC", help="IANA time zone (default UTC)")
    p.add_argument("-n", type=int, default=10, help="how many fire times (default 10)")
    p.add_argument("--start", help="count from this ISO date-time (default now; naive = in --tz)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=cmd_schedule_preview)
