"""The cost bench's engine comparison: each example priced on Step Functions Standard and on
Express, all-in, and the per-run platform overhead both engines pay, measured.

Used by ``bench/cost_bench.py`` (run that). The platform overhead is measured on the local
server (:class:`relayflow.local.serve.LocalServer`): a one-step native workflow is started
``PLATFORM_RUNS`` times with ``POST /workflows/{id}/runs`` and each run is recorded by the
recorder, as on AWS. Every AWS call the authorizer, the API function and the recorder make is
counted (the recorder runs on its own thread, so its calls are told apart from the start's);
their handler times are measured. Express runs record themselves with a native DynamoDB
``UpdateItem`` in the machine (no recorder invocation): 1 write unit, per
``relayflow.cost.bill.Platform``. What the recording states add to an Express execution, its
duration and its log records, is the Express runs' mean minus the Standard runs' (the same
one-step workflow without the wrapper).

Which engine ``auto`` picks is ``relayflow.compiler.engine.choose_engine``
(:func:`auto_engine`). Express is priced on the machine Express really runs
(:func:`express_machine`, ``CompileOptions(express=True)``): its definition size sets the
memory, and its recording states' time is measured and added to the duration.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from relayflow.compiler.engine import EngineChoice
from relayflow.cost import bill, prices
from relayflow.cost.bill import ENGINES, Bill, Engine, Platform, express_floor, price_run
from relayflow.cost.logs import deployed_execution_arn, execution_log_bytes
from relayflow.cost.report import priced_machines
from relayflow.definition.models import Workflow

#: Runs the platform overhead is averaged over.
PLATFORM_RUNS = 20
_DDB_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
_DDB_READS = {"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"}
_RECORDER_THREAD = "relayflow-recorder"


# -- the auto choice and the Express machine ---------------------------------------------------


def auto_engine(workflow: Workflow) -> EngineChoice:
    """The engine ``engine: auto`` picks for ``workflow`` and why: the compiler's own choice
    (``relayflow.compiler.engine.choose_engine``, via ``relayflow.cost.report.priced_machines``),
    whatever ``engine:`` the definition names."""
    return priced_machines(workflow)[2]


def express_machine(workflow: Workflow) -> dict[str, Any]:
    """The machine Express runs for ``workflow`` (``CompileOptions(express=True)``: the
    workflow wrapped in ``_run`` and the native recording states; for a workflow Express
    cannot run, the same wrapper around its Standard machine)."""
    return priced_machines(workflow)[1]


# -- the platform overhead, measured ----------------------------------------------------------


def measure_platform(calls: Callable[[], list[Any]]) -> Platform:
    """Start ``PLATFORM_RUNS`` runs of a one-step native workflow on each engine through the
    local server's control API; ``calls()`` returns every AWS call counted so far
    (``cost_bench.AwsCall``). Standard runs are recorded by the recorder, as on AWS. Express
    runs record themselves; the recorder is then stopped (AWS sends it nothing for Express)
    and the maintenance sweep settles them past their deadline. Returns the per-run averages."""
    from relayflow.local.serve import LocalServer

    timings: dict[str, list[float]] = {"api": [], "authorizer": [], "recorder": []}
    with LocalServer(time_scale=0.001) as server:
        server.set_rate_limit(per_second=10_000, burst=10_000)
        # The handlers are timed by wrapping them where the server keeps them (a bench-only
        # reach into the server's attributes).
        server._api = _timed(server._api, timings["api"])  # type: ignore[arg-type]
        server._authorizer = _timed(server._authorizer, timings["authorizer"])  # type: ignore[arg-type]
        assert server.recorder is not None
        server.recorder._recorder = _timed(server.recorder._recorder, timings["recorder"])
        headers = [("X-Api-Key", server.bootstrap_key), ("Content-Type", "application/json")]
        for engine in ENGINES:
            _put(server, headers, engine)
        server.settle()
        # Standard: started through the API, recorded by the recorder.
        before = len(calls())
        for sink in timings.values():
            sink.clear()
        _start_runs(server, headers, "standard")
        deadline = time.monotonic() + 30
        while len(timings["recorder"]) < 2 * PLATFORM_RUNS and time.monotonic() < deadline:
            server.settle()
        measured = [c for c in calls()[before:] if c.step is None]
        standard_ms = _durations(server, "standard")
        standard_log = _log_bytes(server, "standard")
        # Express: the recorder stopped, the runs recorded by their machines, then swept.
        server.recorder.stop()
        server.recorder = None
        before = len(calls())
        express_runs = _start_runs(server, headers, "express")
        express_start = [c for c in calls()[before:] if c.step is None]
        _wait_ended(server, express_runs)
        express_ms = _durations(server, "express")
        express_log = _log_bytes(server, "express")
        from relayflow.control.express_sweep import sweep_express_runs

        before = len(calls())
        started = time.perf_counter()
        swept = sweep_express_runs(
            server.control(), now=datetime.now(UTC) + timedelta(hours=1), limit=10 * PLATFORM_RUNS
        )
        sweep_ms = (time.perf_counter() - started) * 1000
        assert len(swept["settled"]) == PLATFORM_RUNS, swept
        sweep = [c for c in calls()[before:] if c.step is None]
    recorder = [c for c in measured if c.thread == _RECORDER_THREAD]
    start = [c for c in measured if c.thread != _RECORDER_THREAD]
    n = PLATFORM_RUNS
    return Platform(
        api_requests=1,
        authorizer_ms=_billed_mean(timings["authorizer"]),
        api_ms=_billed_mean(timings["api"]),
        start_write_units=_units(start, _DDB_WRITES) / n,
        start_read_units=_read_units(start) / n,
        recorder_invocations=round(len(timings["recorder"]) / n),
        recorder_ms=_billed_mean(timings["recorder"]),
        recorder_write_units=_units(recorder, _DDB_WRITES) / n,
        recorder_read_units=_read_units(recorder) / n,
        recorder_events=round(_events(recorder) / n),
        native_record_ms=max(0.0, express_ms - standard_ms),
        native_record_log_bytes=max(0.0, express_log - standard_log),
        express_marker_write_units=(_units(express_start, _DDB_WRITES) - _units(start, _DDB_WRITES))
        / n,
        sweep_ms=math.ceil(sweep_ms) / n,
        sweep_write_units=_units(sweep, _DDB_WRITES) / n,
        sweep_read_units=_read_units(sweep) / n,
        sweep_events=round(_events(sweep) / n),
    )


def _put(server: Any, headers: list[tuple[str, str]], engine: Engine) -> None:
    definition = {
        "id": f"bench-platform-{engine}",
        "engine": engine,
        "start": "done",
        "steps": {"done": {"type": "transform", "mapping": {"ok": True}}},
    }
    put = server.dispatch(
        "PUT", f"/workflows/{definition['id']}", headers, json.dumps(definition).encode()
    )
    assert put.status < 300, put.body


def _start_runs(server: Any, headers: list[tuple[str, str]], engine: Engine) -> list[str]:
    run_ids = []
    for _ in range(PLATFORM_RUNS):
        started = server.dispatch(
            "POST", f"/workflows/bench-platform-{engine}/runs", headers, b"{}"
        )
        assert started.status < 300, started.body
        run_ids.append(json.loads(started.body)["run_id"])
    server.settle()
    return run_ids


def _wait_ended(server: Any, run_ids: list[str]) -> None:
    control = server.control()
    tenant = control.authenticate(server.bootstrap_key)
    for run_id in run_ids:
        run = control.dal.get_run(tenant, run_id)
        assert run is not None and run.execution_arn
        server.runtime.wait(run.execution_arn, timeout=30)


def _durations(server: Any, engine: Engine) -> float:
    """Mean duration (ms) of the platform workflow's executions on ``engine``."""
    found = []
    for arn in server.runtime.list_executions():
        if f"bench-platform-{engine}" not in arn:
            continue
        described = server.runtime.sfn_client.describe_execution(executionArn=arn)
        if "stopDate" in described:
            found.append((described["stopDate"] - described["startDate"]).total_seconds() * 1000)
    return sum(found) / len(found) if found else 0.0


def _log_bytes(server: Any, engine: Engine) -> float:
    """Mean CloudWatch Logs bytes (level ALL) of the platform workflow's executions on
    ``engine``, every record naming the same modelled ARN so that only the events differ."""
    found = []
    for arn in server.runtime.list_executions():
        if f"bench-platform-{engine}" in arn:
            modelled = deployed_execution_arn("bench-platform", arn.split(":")[7], express=True)
            found.append(execution_log_bytes(server.runtime.describe(arn).events, modelled, "ALL"))
    return sum(found) / len(found) if found else 0.0


def _events(calls: list[Any]) -> float:
    return float(sum(c.units for c in calls if (c.service, c.operation) == ("events", "PutEvents")))


def _timed(handler: Any, sink: list[float]) -> Callable[[Any, Any], Any]:
    def timed(event: Any, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return handler(event, context)
        finally:
            sink.append((time.perf_counter() - started) * 1000)

    return timed


def _billed_mean(samples: list[float]) -> float:
    """Mean billed milliseconds (each rounded up to 1 ms, as Lambda bills)."""
    return sum(math.ceil(s) for s in samples) / len(samples) if samples else 0.0


def _units(calls: list[Any], operations: set[str]) -> float:
    return float(
        sum(c.units for c in calls if c.service == "dynamodb" and c.operation in operations)
    )


def _read_units(calls: list[Any]) -> float:
    return sum(
        c.units * (0.5 if c.eventual else 1.0)
        for c in calls
        if c.service == "dynamodb" and c.operation in _DDB_READS
    )


def print_platform(platform: Platform) -> None:
    print(f"\nplatform overhead per run, measured on the local server ({PLATFORM_RUNS} runs each):")
    print(
        f"  start: 1 API Gateway REST request, authorizer {platform.authorizer_ms:.1f} ms + API "
        f"function {platform.api_ms:.1f} ms, DynamoDB {platform.start_write_units:g} WRU / "
        f"{platform.start_read_units:g} RRU"
    )
    print(
        f"  Standard recording: {platform.recorder_invocations} recorder invocations of "
        f"{platform.recorder_ms:.1f} ms, DynamoDB {platform.recorder_write_units:g} WRU / "
        f"{platform.recorder_read_units:g} RRU, {platform.recorder_events} lifecycle events"
    )
    print(
        f"  Express recording: the machine's own UpdateItem, "
        f"{platform.native_record_write_units:g} WRU, its states add "
        f"{platform.native_record_ms:.1f} ms and {platform.native_record_log_bytes:,.0f} log "
        f"bytes; the deadline marker "
        f"{platform.express_marker_write_units:g} WRU; the sweep {platform.sweep_ms:.1f} ms, "
        f"{platform.sweep_write_units:g} WRU / {platform.sweep_read_units:g} RRU, "
        f"{platform.sweep_events} lifecycle events (no recorder invocation)"
    )
    for engine in ENGINES:
        lines = bill.platform_lines(engine, platform)
        total = sum(line.dollars for line in lines)
        print(f"  {engine}: ${total * 1_000_000:,.2f} per 1M runs")


# -- one example on both engines --------------------------------------------------------------


def run_usage(usage: Any) -> bill.RunUsage:
    """``usage`` (``cost_bench.RunUsage``, a run of the Standard machine) as the bill prices
    it: its own duration, memory and log, without Express's recording states."""
    writes = usage.units("dynamodb", _DDB_WRITES)
    other = sum(d or 0.0 for service, _, d in usage.costs() if ":" in service)
    return bill.RunUsage(
        transitions=usage.transitions,
        lambda_invocations=len(usage.invocations),
        lambda_ms=float(sum(math.ceil(i.duration_ms) for i in usage.invocations)),
        duration_ms=usage.duration_ms,
        write_units=float(writes),
        read_units=usage.read_units,
        other_dollars=other,
        express_memory_mb=bill.express_memory_mb(
            usage.definition_bytes, usage.data_bytes, usage.fan_out
        ),
        express_log_bytes=usage.express_log_bytes,
        standard_log_bytes=usage.standard_log_bytes,
    )


def engine_bills(usage: Any, platform: Platform, express_asl: dict[str, Any]) -> dict[Engine, Bill]:
    """``usage`` (``cost_bench.RunUsage``, a run of the Standard machine) priced on both
    engines, all-in. Express is priced on ``express_asl`` (:func:`express_machine`): its size
    sets the memory, and its recording states' measured time and log records are added."""
    run = run_usage(usage)
    express_bytes = len(json.dumps(express_asl, separators=(",", ":")).encode())
    express = replace(
        run,
        duration_ms=usage.duration_ms + platform.native_record_ms,
        # The _run Parallel is one more Parallel state holding the execution data.
        express_memory_mb=bill.express_memory_mb(
            express_bytes, usage.data_bytes, usage.fan_out + 1
        ),
        express_log_bytes=usage.express_log_bytes + platform.native_record_log_bytes,
    )
    return {
        "standard": price_run(run, "standard", platform),
        "express": price_run(express, "express", platform),
    }


def floor_bill(usage: Any) -> Bill:
    """The least ``usage`` can cost on Express, whatever starts and records it
    (``relayflow.cost.bill.express_floor``: the request, the run's own duration, the steps'
    own work)."""
    return express_floor(run_usage(usage))


def print_engines(
    usage: Any,
    bills: dict[Engine, Bill],
    choice: EngineChoice,
    platform: Platform,
    floor: Bill,
) -> None:
    standard, express = bills["standard"], bills["express"]
    print(
        f"  on both engines, all-in (Express duration {usage.duration_ms:,.0f} ms: the local "
        "run with its waits and retry intervals at their configured length, + "
        f"{platform.native_record_ms:.0f} ms of recording states; execution log: "
        f"{usage.log_events} events, {usage.express_log_bytes:,} bytes at level ALL + "
        f"{platform.native_record_log_bytes:,.0f} of recording states on Express, "
        f"{usage.standard_log_bytes:,} bytes at level ERROR on Standard)"
    )
    print(f"  {'item':<34} {'Standard $/1M':>14} {'Express $/1M':>13}")
    items = list(dict.fromkeys([line.item for line in standard.lines + express.lines]))
    for item in items:
        cells = []
        for one in (standard, express):
            found = [line.dollars for line in one.lines if line.item == item]
            cells.append(f"{found[0] * 1_000_000:,.2f}" if found else "-")
        print(f"  {item:<34} {cells[0]:>14} {cells[1]:>13}")
    saving = _ratio(standard.total, express.total)
    verdict = (
        f"Express is {saving:.1f}x cheaper"
        if saving >= 1
        else f"Express costs {1 / saving:.1f}x as much"
    )
    print(
        f"  {'total':<34} {standard.per_million():>14,.2f} {express.per_million():>13,.2f}"
        f"   {verdict}"
    )
    print(
        f"  Express floor (request, own duration, steps' work; no start, recording or log): "
        f"{floor.per_million():,.2f}, so at best {_ratio(standard.total, floor.total):.1f}x"
    )
    print(f"  auto picks {choice.engine}: {choice.reason}")


#: The acceptance target of issue 19: Express-eligible examples this many times cheaper.
TARGET_SAVING = 20.0


@dataclass(frozen=True)
class Compared:
    """One example priced on both engines, and Express's floor for it."""

    label: str
    #: The engine ``auto`` picks.
    pick: Engine
    bills: dict[Engine, Bill]
    floor: Bill

    @property
    def saving(self) -> float:
        return _ratio(self.bills["standard"].total, self.bills["express"].total)

    @property
    def best_saving(self) -> float:
        """Standard all-in over Express's floor: the most any start or recording could give."""
        return _ratio(self.bills["standard"].total, self.floor.total)


def print_summary(rows: list[Compared]) -> None:
    print("\nper 1,000,000 runs, all-in (API start, recording and execution log included):")
    print(
        f"  {'example':<26} {'auto':<9} {'Standard':>9} {'Express':>8} {'saving':>7} "
        f"{'20x needs':>9} {'floor':>6} {'best':>7}  {TARGET_SAVING:g}x?"
    )
    for row in rows:
        standard, express = row.bills["standard"], row.bills["express"]
        reachable = (
            "met"
            if row.saving >= TARGET_SAVING
            else ("reachable" if row.best_saving >= TARGET_SAVING else "never")
        )
        print(
            f"  {row.label:<26} {row.pick:<9} {standard.per_million():>9,.2f} "
            f"{express.per_million():>8,.2f} {row.saving:>6.1f}x "
            f"{standard.per_million() / TARGET_SAVING:>9,.2f} {row.floor.per_million():>6.2f} "
            f"{row.best_saving:>6.1f}x  {reachable}"
        )
    print(
        "  20x needs: the most Express may cost all-in; floor: the Express request, the run's "
        "own duration and the\n  steps' own work (no start, no recording, no log), the least "
        "Express can cost; best: Standard / floor,\n  the saving no start or recording can "
        "pass ('never': below 20x whatever starts and records the run)"
    )


def _ratio(standard: float, express: float) -> float:
    return standard / express if express else math.inf


# -- what would reach 20x: the start and the recording, priced differently ----------------------


def start_variants(platform: Platform) -> list[tuple[str, Platform]]:
    """What-ifs for the per-run work outside the machine, from the measured ``platform``:
    (label, platform). None of them is deployed; docs/cost.md says what each would take."""
    http = replace(platform, api_per_request=prices.API_GATEWAY_HTTP_PER_REQUEST)
    return [
        ("today", platform),
        ("http, no auth", replace(http, authorizer_invocations=0.0)),
        (
            # An EventBridge event or schedule ($1.00 per 1M) invokes the start function.
            "EventBridge",
            replace(
                platform,
                api_per_request=prices.EVENTS_PER_EVENT,
                authorizer_invocations=0.0,
            ),
        ),
        (
            "no start",
            replace(platform, api_requests=0, start_write_units=0.0, start_read_units=0.0),
        ),
        (
            "no start/sweep",
            replace(
                platform,
                api_requests=0,
                start_write_units=0.0,
                start_read_units=0.0,
                express_marker_write_units=0.0,
                sweep_ms=0.0,
                sweep_write_units=0.0,
                sweep_read_units=0.0,
                sweep_events=0,
            ),
        ),
    ]


def print_what_if(rows: list[Compared], platform: Platform) -> None:
    """Each example's Express bill and saving under each :func:`start_variants` (Standard kept
    as measured today, so the ratios show what the change buys Express alone), then its
    floor."""
    variants = start_variants(platform)
    today = sum(line.dollars for line in bill.platform_lines("express", platform))
    print(
        f"\nwhat would reach {TARGET_SAVING:g}x: Express $ per 1M runs all-in and the saving, "
        "under other starts and recordings (Standard as today; none of these is deployed):"
    )
    print(
        f"  {'example':<26} {'auto':<9}  "
        + "  ".join(f"{label:>14}" for label, _ in [*variants, ("floor", platform)])
    )
    for row in rows:
        standard, express = row.bills["standard"].total, row.bills["express"].total
        cells = []
        for _, variant in variants:
            other = sum(line.dollars for line in bill.platform_lines("express", variant))
            total = express - today + other
            cells.append(f"{total * 1e6:>7.2f} {_ratio(standard, total):>5.1f}x")
        cells.append(f"{row.floor.per_million():>7.2f} {row.best_saving:>5.1f}x")
        print(f"  {row.label:<26} {row.pick:<9}  " + "  ".join(f"{c:>14}" for c in cells))
    print(
        "  today: REST API + authorizer, marker + sweep; http, no auth: an HTTP API ($1.00) and "
        "no authorizer invocation;\n  EventBridge: an event or schedule ($1.00) invokes the "
        "start function; no start: the machine, its recording\n  and the sweep only; no start/"
        "sweep: the machine, its native record and log only; floor: see above"
    )
