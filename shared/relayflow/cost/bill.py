"""Pricing one run on either Step Functions engine, at :mod:`relayflow.cost.prices`.

A run's usage (:class:`RunUsage`) is what its state machine and step Lambdas consumed; the
engine decides how the state machine is billed (Standard: per transition; Express: per
request plus duration). :class:`Platform` is what a run costs around its state machine: the
start through the control API, and recording its end (the recorder Lambda on Standard; on
Express a native DynamoDB ``UpdateItem`` in the machine, the start's deadline marker and the
maintenance sweep that settles the run). :func:`price_run` adds them up, and
:func:`express_floor` is the least Express can cost for a run whatever its start and recording.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from relayflow.cost import prices
from relayflow.cost.logs import logs_dollars

Engine = Literal["standard", "express"]
ENGINES: tuple[Engine, ...] = ("standard", "express")
#: MemorySize of the step and recorder functions (template.yaml Globals) and of the API one.
STEP_MEMORY_MB = 512
API_MEMORY_MB = 1024


@dataclass(frozen=True)
class RunUsage:
    """What one run's state machine and step functions consumed (engine-independent)."""

    transitions: int
    lambda_invocations: int
    #: Billed step Lambda time: the sum of each invocation's duration rounded up to 1 ms.
    lambda_ms: float
    #: The execution's duration (what Express bills).
    duration_ms: float
    #: DynamoDB request units the steps used.
    write_units: float = 0.0
    read_units: float = 0.0
    #: Other priced calls of the steps (S3, SES, EventBridge), in dollars.
    other_dollars: float = 0.0
    #: Express memory: AWS's estimate is 50 MB + the definition + the execution data times
    #: the Map/Parallel steps, billed in 64 MB chunks (see :func:`express_memory_mb`).
    express_memory_mb: int = prices.EXPRESS_MEMORY_CHUNK_MB
    #: Bytes the machine writes to CloudWatch Logs on each engine (``relayflow.cost.logs``):
    #: Express logs every event (level ALL), Standard only errors (level ERROR).
    express_log_bytes: float = 0.0
    standard_log_bytes: float = 0.0


@dataclass(frozen=True)
class Platform:
    """Per-run work outside the state machine. The defaults were measured by
    ``bench/cost_bench.py`` on the local server (a run started with ``POST /workflows/{id}/runs``
    and recorded by the recorder), see docs/cost.md; durations are local handler times, a rough
    proxy for Graviton."""

    #: The start: one API Gateway REST call, the authorizer (no result caching) and the API
    #: function, and the DynamoDB units the start uses (the run item; the key, workflow and
    #: version reads).
    api_requests: int = 1
    #: What API Gateway charges per request (REST; the bench's what-ifs price others).
    api_per_request: float = prices.API_GATEWAY_REST_PER_REQUEST
    #: Authorizer invocations per request: 1 without result caching (today), 0 for a start
    #: that needs none (a cached or built-in authorizer, a start without the API).
    authorizer_invocations: float = 1.0
    authorizer_ms: float = 8.0
    api_ms: float = 53.0
    start_write_units: float = 1.0
    start_read_units: float = 3.0
    #: Standard: the recorder runs for the RUNNING and for the terminal status change.
    recorder_invocations: int = 2
    recorder_ms: float = 67.0
    recorder_write_units: float = 2.0
    recorder_read_units: float = 3.0
    #: Lifecycle events the recorder publishes (started, and the end) on the Relayflow bus.
    recorder_events: int = 2
    #: Express: the machine's own terminal ``UpdateItem`` (no recorder invocation) ...
    native_record_write_units: float = 1.0
    #: ... and the time its recording states add to the execution (Express bills it) ...
    native_record_ms: float = 18.0
    #: ... and the log records they add (the ``_run`` Parallel and the ``_record`` states,
    #: at level ALL). Priced in the run's execution log line, not in the platform's.
    native_record_log_bytes: float = 3914.0
    #: Express: the deadline marker the start writes (``relayflow.dal.express``) ...
    express_marker_write_units: float = 1.0
    #: ... and the maintenance sweep's work per run once the deadline passed: the marker
    #: query, the run item read, the settle (``recorded_status``) and the marker delete, its
    #: Lambda time (the schedule's invocations themselves are per minute, not per run) and the
    #: lifecycle event it publishes.
    sweep_ms: float = 118.0
    sweep_write_units: float = 2.0
    sweep_read_units: float = 3.0
    sweep_events: int = 1


PLATFORM = Platform()


@dataclass(frozen=True)
class Line:
    """One priced line of a bill: what, how much per run, dollars per run."""

    item: str
    usage: str
    dollars: float


@dataclass(frozen=True)
class Bill:
    engine: Engine
    lines: tuple[Line, ...] = field(default_factory=tuple)

    @property
    def total(self) -> float:
        """Dollars per run."""
        return sum(line.dollars for line in self.lines)

    def per_million(self) -> float:
        return self.total * 1_000_000


def lambda_dollars(invocations: float, billed_ms: float, memory_mb: int = STEP_MEMORY_MB) -> float:
    """Requests plus arm64 duration of ``invocations`` that ran ``billed_ms`` in all."""
    gb_seconds = billed_ms / 1000 * memory_mb / 1024
    return invocations * prices.LAMBDA_PER_REQUEST + gb_seconds * prices.LAMBDA_PER_GB_SECOND


def express_billed_ms(duration_ms: float) -> int:
    """Express duration as billed: rounded up to the next 100 ms (at least 100 ms)."""
    step = prices.EXPRESS_BILLING_MS
    return max(step, math.ceil(duration_ms / step) * step)


def express_memory_mb(definition_bytes: int, data_bytes: int = 0, fan_out: int = 0) -> int:
    """AWS's estimate of an Express execution's memory, in billed 64 MB chunks: 50 MB + the
    definition + the execution data times the number of Map/Parallel steps (at least 1)."""
    used_mb = (
        prices.EXPRESS_BASE_MEMORY_MB + (definition_bytes + data_bytes * max(1, fan_out)) / 2**20
    )
    chunk = prices.EXPRESS_MEMORY_CHUNK_MB
    return max(chunk, math.ceil(used_mb / chunk) * chunk)


def state_machine_lines(usage: RunUsage, engine: Engine) -> list[Line]:
    """What the state machine itself costs on ``engine``: its transitions (Standard) or its
    request and duration (Express), and its execution log."""
    if engine == "standard":
        return [
            Line(
                "Step Functions Standard",
                f"{usage.transitions} transitions",
                usage.transitions * prices.STANDARD_PER_TRANSITION,
            ),
            _logs_line(usage.standard_log_bytes, "ERROR"),
        ]
    billed = express_billed_ms(usage.duration_ms)
    gb_seconds = billed / 1000 * usage.express_memory_mb / 1024
    return [
        Line("Step Functions Express request", "1 request", prices.EXPRESS_PER_REQUEST),
        Line(
            "Step Functions Express duration",
            f"{billed} ms x {usage.express_memory_mb} MB",
            gb_seconds * prices.EXPRESS_PER_GB_SECOND,
        ),
        _logs_line(usage.express_log_bytes, "ALL"),
    ]


#: The bill line of a machine's execution log.
LOGS_ITEM = "CloudWatch Logs (execution log)"


def _logs_line(log_bytes: float, level: str) -> Line:
    return Line(LOGS_ITEM, f"{log_bytes / 1000:,.1f} KB ({level})", logs_dollars(log_bytes))


def platform_lines(
    engine: Engine, platform: Platform = PLATFORM, *, start: bool = True
) -> list[Line]:
    """The start through the control API (when ``start``) and the recording of the end."""
    lines: list[Line] = []
    if start:
        lines += [
            Line(
                "API Gateway (start)",
                f"{platform.api_requests} request",
                platform.api_requests * platform.api_per_request,
            ),
            Line(
                "Lambda: authorizer + API (start)",
                f"{platform.api_requests * (1 + platform.authorizer_invocations):g} invocations",
                # Each request runs the authorizer (no result caching) and the API function.
                lambda_dollars(
                    platform.api_requests * platform.authorizer_invocations,
                    platform.api_requests
                    * platform.authorizer_invocations
                    * platform.authorizer_ms,
                )
                + lambda_dollars(
                    platform.api_requests, platform.api_requests * platform.api_ms, API_MEMORY_MB
                ),
            ),
            Line(
                "DynamoDB (start)",
                f"{platform.start_write_units:g} WRU, {platform.start_read_units:g} RRU",
                _dynamodb(platform.start_write_units, platform.start_read_units),
            ),
        ]
    if engine == "standard":
        lines += [
            Line(
                "Lambda: recorder",
                f"{platform.recorder_invocations} invocations",
                lambda_dollars(
                    platform.recorder_invocations,
                    platform.recorder_invocations * platform.recorder_ms,
                ),
            ),
            Line(
                "DynamoDB (recorder)",
                f"{platform.recorder_write_units:g} WRU, {platform.recorder_read_units:g} RRU",
                _dynamodb(platform.recorder_write_units, platform.recorder_read_units),
            ),
            Line(
                "EventBridge (lifecycle events)",
                f"{platform.recorder_events} events",
                platform.recorder_events * prices.EVENTS_PER_EVENT,
            ),
        ]
    else:
        writes = platform.express_marker_write_units + platform.sweep_write_units
        lines += [
            Line(
                "DynamoDB (native record)",
                f"{platform.native_record_write_units:g} WRU",
                _dynamodb(platform.native_record_write_units, 0.0),
            ),
            Line(
                "DynamoDB (deadline marker + sweep)",
                f"{writes:g} WRU, {platform.sweep_read_units:g} RRU",
                _dynamodb(writes, platform.sweep_read_units),
            ),
            Line(
                "Lambda: maintenance sweep",
                f"{platform.sweep_ms:g} ms",
                lambda_dollars(0, platform.sweep_ms),
            ),
            Line(
                "EventBridge (lifecycle events, sweep)",
                f"{platform.sweep_events} events",
                platform.sweep_events * prices.EVENTS_PER_EVENT,
            ),
        ]
    return lines


def price_run(
    usage: RunUsage, engine: Engine, platform: Platform = PLATFORM, *, start: bool = True
) -> Bill:
    """Everything one run costs on ``engine``: the state machine and its log, the step
    Lambdas, the steps' DynamoDB units and other priced calls, and the platform's start and
    recording."""
    lines = state_machine_lines(usage, engine) + step_lines(usage)
    lines += platform_lines(engine, platform, start=start)
    return Bill(engine, tuple(lines))


def step_lines(usage: RunUsage) -> list[Line]:
    """The steps' own work, the same on both engines: their Lambdas, their DynamoDB units and
    their other priced calls."""
    lines = [
        Line(
            "Lambda: steps",
            f"{usage.lambda_invocations} invocations, {usage.lambda_ms:g} ms",
            lambda_dollars(usage.lambda_invocations, usage.lambda_ms),
        )
    ]
    if usage.write_units or usage.read_units:
        lines.append(
            Line(
                "DynamoDB (steps)",
                f"{usage.write_units:g} WRU, {usage.read_units:g} RRU",
                _dynamodb(usage.write_units, usage.read_units),
            )
        )
    if usage.other_dollars:
        lines.append(Line("other AWS calls (steps)", "S3, SES, events", usage.other_dollars))
    return lines


def express_floor(usage: RunUsage) -> Bill:
    """The least ``usage`` can cost on Express whatever starts and records it: the Express
    request, the run's own duration (``usage.duration_ms``, without recording states; at
    least the 100 ms Express bills) and the steps' own work. No start, no recording, no
    execution log (a machine logging ``OFF``). No start or recording can make the run more
    than ``standard.total / floor.total`` times cheaper on Express than on Standard."""
    request, duration, _ = state_machine_lines(usage, "express")
    return Bill("express", (request, duration, *step_lines(usage)))


def _dynamodb(write_units: float, read_units: float) -> float:
    return write_units * prices.DYNAMODB_PER_WRITE_UNIT + read_units * prices.DYNAMODB_PER_READ_UNIT
