"""The cost bench's engine comparison: each example priced on Step Functions Standard and on
Express, all-in, and the per-run platform overhead both engines pay, measured.

Used by ``bench/cost_bench.py`` (run that). The platform overhead is measured on the local
server (:class:`relayflow.local.serve.LocalServer`): a one-step native workflow is started
``PLATFORM_RUNS`` times with ``POST /workflows/{id}/runs`` and each run is recorded by the
recorder, as on AWS. Every AWS call the authorizer, the API function and the recorder make is
counted (the recorder runs on its own thread, so its calls are told apart from the start's);
their handler times are measured. Express runs record themselves with a native DynamoDB
``UpdateItem`` in the machine (no recorder invocation): 1 write unit, per
``relayflow.cost.bill.Platform``.

Which engine ``auto`` would pick comes through one seam, :func:`auto_engine`: it calls
``relayflow.compiler.engine.choose_engine`` when that exists, and otherwise a conservative
stand-in (:func:`stand_in_auto_choice`) that lives here, in the bench, and nowhere else.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from relayflow.compiler import CompiledWorkflow
from relayflow.cost import bill
from relayflow.cost.bill import ENGINES, Bill, Engine, Platform, price_run
from relayflow.cost.estimate import back_edges
from relayflow.definition.models import Workflow

#: Runs the platform overhead is averaged over.
PLATFORM_RUNS = 20
#: Express's limit on an execution's duration.
EXPRESS_MAX_SECONDS = 300
#: Timeout of the step functions (template.yaml Globals), for a Task that sets none.
FUNCTION_TIMEOUT_SECONDS = 30
_CALLBACKS = (".waitForTaskToken", ".sync")
_DDB_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
_DDB_READS = {"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"}
_RECORDER_THREAD = "relayflow-recorder"


# -- the auto choice --------------------------------------------------------------------------


def auto_engine(workflow: Workflow, compiled: CompiledWorkflow) -> tuple[Engine, str]:
    """The engine ``engine: auto`` picks for ``workflow`` and why. The one seam: the
    compiler's ``choose_engine`` once it exists, else :func:`stand_in_auto_choice`."""
    try:
        from relayflow.compiler.engine import choose_engine  # type: ignore[import-not-found]
    except ImportError:
        engine, reason = stand_in_auto_choice(compiled.asl)
        return engine, f"stand-in: {reason}"
    choice = choose_engine(workflow, compiled)
    return choice.engine, choice.reason


def stand_in_auto_choice(asl: Mapping[str, Any]) -> tuple[Engine, str]:
    """A conservative stand-in for the engine choice, for this bench only: Express only when
    no state waits for a callback or a ``.sync`` child, and the sum over ALL states (not one
    path: an upper bound) of every Wait, every Task's timeout (a Lambda Task without one: the
    functions' 30 s) times its attempts, and every retry interval stays under 5 minutes.
    Retriers of Lambda's own service errors (``Lambda.*``) are left out of that sum: they fire
    on AWS's faults, not the workflow's. A loop at the top level makes it Standard (its length
    depends on data). It does not check step idempotency."""
    loops = back_edges(asl.get("States") or {}, str(asl.get("StartAt", "")))
    if loops:
        source, target = sorted(loops)[0]
        return "standard", f"a loop ({source} -> {target}) makes the run's length depend on data"
    worst = 0.0
    for name, state in _all_states(asl):
        resource = str(state.get("Resource", ""))
        if any(marker in resource for marker in _CALLBACKS):
            return "standard", f"{name} waits for a callback or a child ({resource})"
        if state.get("Type") == "Wait":
            if "Seconds" not in state:
                return "standard", f"{name} waits for a time known only at run time"
            worst += float(state["Seconds"])
        if state.get("Type") == "Task":
            retriers = [
                r
                for r in state.get("Retry") or []
                if not all(str(e).startswith("Lambda.") for e in r.get("ErrorEquals") or [])
            ]
            attempts, waits = _retry_worst(retriers)
            timeout = state.get("TimeoutSeconds") or FUNCTION_TIMEOUT_SECONDS
            worst += float(timeout) * attempts + waits
    if worst >= EXPRESS_MAX_SECONDS:
        return "standard", f"the longest run could take {worst:g} s (Express: under 300 s)"
    return "express", f"no callbacks or .sync, the longest run at most {worst:g} s"


def _all_states(machine: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    found: list[tuple[str, Mapping[str, Any]]] = []
    for name, state in (machine.get("States") or {}).items():
        found.append((name, state))
        for branch in state.get("Branches") or []:
            found += _all_states(branch)
        inner = state.get("ItemProcessor") or state.get("Iterator")
        if inner:
            found += _all_states(inner)
    return found


def _retry_worst(retriers: list[Mapping[str, Any]]) -> tuple[int, float]:
    """Attempts and the sum of retry intervals if every retrier ran out (an upper bound)."""
    attempts, waits = 1, 0.0
    for retrier in retriers:
        interval = float(retrier.get("IntervalSeconds", 1))
        rate = float(retrier.get("BackoffRate", 2.0))
        cap = retrier.get("MaxDelaySeconds")
        for n in range(int(retrier.get("MaxAttempts", 3))):
            delay = interval * rate**n
            waits += min(delay, float(cap)) if cap is not None else delay
            attempts += 1
    return attempts, waits


# -- the platform overhead, measured ----------------------------------------------------------


def measure_platform(calls: Callable[[], list[Any]]) -> Platform:
    """Start ``PLATFORM_RUNS`` runs of a one-step native workflow through the local server's
    control API and let the recorder record them; ``calls()`` returns every AWS call counted
    so far (``cost_bench.AwsCall``). Returns the per-run averages."""
    from relayflow.local.serve import LocalServer

    definition = {
        "id": "bench-platform",
        "start": "done",
        "steps": {"done": {"type": "transform", "mapping": {"ok": True}}},
    }
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
        put = server.dispatch(
            "PUT", "/workflows/bench-platform", headers, json.dumps(definition).encode()
        )
        assert put.status < 300, put.body
        server.settle()
        before = len(calls())
        for _ in (timings["api"], timings["authorizer"], timings["recorder"]):
            _.clear()
        for _ in range(PLATFORM_RUNS):
            started = server.dispatch("POST", "/workflows/bench-platform/runs", headers, b"{}")
            assert started.status < 300, started.body
        server.settle()
        deadline = time.monotonic() + 30
        while len(timings["recorder"]) < 2 * PLATFORM_RUNS and time.monotonic() < deadline:
            server.settle()
        measured = [c for c in calls()[before:] if c.step is None]
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
        recorder_events=round(
            sum(c.units for c in recorder if (c.service, c.operation) == ("events", "PutEvents"))
            / n
        ),
    )


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
    print(f"\nplatform overhead per run, measured on the local server ({PLATFORM_RUNS} runs):")
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
        f"{platform.native_record_write_units:g} WRU (no recorder invocation)"
    )
    for engine in ENGINES:
        lines = bill.platform_lines(engine, platform)
        total = sum(line.dollars for line in lines)
        print(f"  {engine}: ${total * 1_000_000:,.2f} per 1M runs")


# -- one example on both engines --------------------------------------------------------------


def engine_bills(usage: Any, platform: Platform) -> dict[Engine, Bill]:
    """``usage`` (``cost_bench.RunUsage``) priced on both engines, all-in."""
    writes = usage.units("dynamodb", _DDB_WRITES)
    other = sum(d or 0.0 for service, _, d in usage.costs() if ":" in service)
    run = bill.RunUsage(
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
    )
    return {engine: price_run(run, engine, platform) for engine in ENGINES}


def print_engines(usage: Any, bills: dict[Engine, Bill], choice: tuple[Engine, str]) -> None:
    standard, express = bills["standard"], bills["express"]
    print(
        f"  on both engines, all-in (Express duration {usage.duration_ms:,.0f} ms: the local "
        "run with its waits and retry intervals at their configured length)"
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
    print(f"  auto picks {choice[0]}: {choice[1]}")


#: Bill lines that are the steps' own work (the same on both engines).
STEP_WORK = ("DynamoDB (steps)", "other AWS calls (steps)")


def print_summary(rows: list[tuple[str, Engine, float, dict[Engine, Bill]]]) -> None:
    """(label, auto's pick, today's basis, the bills) per example."""
    print("\nper 1,000,000 runs, all-in (API start and recording included):")
    print(
        f"  {'example':<26} {'auto':<9} {'steps only':>11} {'Standard':>10} {'Express':>10} "
        f"{'saving':>7} {'w/o step work':>13}"
    )
    for label, pick, basis, bills in rows:
        standard, express = bills["standard"], bills["express"]
        orchestration = [
            sum(line.dollars for line in one.lines if line.item not in STEP_WORK)
            for one in (standard, express)
        ]
        print(
            f"  {label:<26} {pick:<9} {basis:>11,.2f} {standard.per_million():>10,.2f} "
            f"{express.per_million():>10,.2f} {_ratio(standard.total, express.total):>6.1f}x "
            f"{_ratio(*orchestration):>12.1f}x"
        )
    print(
        "  steps only: the state machine on Standard and the steps (what this bench reported "
        "before the engines were compared);\n  w/o step work: the saving without the steps' own "
        "DynamoDB and other calls (an email costs the same on both engines)"
    )


def _ratio(standard: float, express: float) -> float:
    return standard / express if express else math.inf
