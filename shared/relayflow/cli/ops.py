"""``relayflow ops``: operating a deployed stack with the caller's AWS credentials.

``relayflow ops redrive <queue>`` replays the messages of a dead-letter queue (the recorder's,
the trigger's or maintenance's; docs/operations.md, "Dead-letter queues").
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from relayflow.cli.output import EXIT_OK, EXIT_RUN_FAILED
from relayflow.cli.parsing import command_group


def cmd_ops_redrive(args: argparse.Namespace) -> int:
    from relayflow.control.redrive import RedriveError, redrive

    try:
        result = redrive(args.queue, limit=args.limit)
    except RedriveError as exc:
        print(f"relayflow: {exc}", file=sys.stderr)
        return EXIT_RUN_FAILED
    for replay in result.replays:
        state = "replayed" if replay.ok else f"FAILED ({replay.error})"
        print(f"{replay.message_id}  {replay.function_arn or '-'}  {state}")
    print(f"{result.replayed} replayed, {len(result.failed)} left in the queue")
    return EXIT_OK if not result.failed else EXIT_RUN_FAILED


def add_ops_commands(sub: Any) -> None:
    """The ``ops`` command group, added to ``relayflow``'s parser."""
    ops = command_group(sub, "ops", "operate a deployed stack (AWS credentials)")
    p = ops.add_parser(
        "redrive", help="replay a dead-letter queue's messages; each is deleted once it succeeds"
    )
    p.add_argument("queue", help="queue URL, ARN or name, e.g. relayflow-prod-recorder-dlq")
    p.add_argument("--limit", type=int, help="replay at most this many messages")
    p.set_defaults(func=cmd_ops_redrive)
