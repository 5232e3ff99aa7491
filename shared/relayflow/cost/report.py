"""The text ``relayflow compile --cost`` prints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from relayflow.cost.bill import ENGINES, Engine
from relayflow.cost.estimate import DEFAULT_ITEMS, DEFAULT_LOG_EVENT_BYTES, Estimate, estimate

if TYPE_CHECKING:
    from relayflow.compiler.engine import EngineChoice
    from relayflow.definition.models import Workflow


def priced_machines(workflow: Workflow) -> tuple[dict[str, Any], dict[str, Any], EngineChoice]:
    """What the cost report prices ``workflow`` on: its Standard machine, the machine Express
    runs, and the engine ``engine: auto`` picks (whatever ``engine:`` the definition names).
    The Express machine is compiled with ``CompileOptions(express=True)`` (the workflow in a
    ``_run`` Parallel with its native recording states); for a workflow Express cannot run,
    the same wrapper around its Standard machine, to price what Express would cost."""
    from relayflow.compiler import CompileOptions, compile_workflow
    from relayflow.compiler.engine import EXPRESS_MAX_SECONDS, choose_engine
    from relayflow.compiler.recording import RUN_STATE, with_native_recording
    from relayflow.settings import get_settings

    as_auto = workflow.model_copy(update={"engine": "auto"})
    compiled = compile_workflow(as_auto, CompileOptions(express=True))
    choice = choose_engine(as_auto, compiled)
    standard = compile_workflow(workflow).asl
    express = compiled.asl
    if RUN_STATE not in express["States"]:
        express = with_native_recording(standard, get_settings().table_name, EXPRESS_MAX_SECONDS)
    return standard, express, choice


def cost_report(
    asl: Mapping[str, Any],
    *,
    express_asl: Mapping[str, Any] | None = None,
    choice: EngineChoice | None = None,
    items: int = DEFAULT_ITEMS,
) -> str:
    """The estimated cost per 1,000,000 runs on both engines, for the cheapest and the
    dearest path, with the counts and assumptions behind it (docs/cost.md). ``asl`` is the
    Standard machine; ``express_asl`` the machine Express runs (the workflow wrapped in its
    native recording states), priced for the Express column when given. ``choice``, when
    given, marks the engine ``auto`` picks and says why."""
    standard = estimate(asl, items=items)
    express = estimate(express_asl, items=items) if express_asl is not None else standard
    picked = choice.engine if choice is not None else None
    lines = [
        f"estimated cost of '{asl.get('Comment', '')}' per 1,000,000 runs, us-east-1 list "
        "prices, all-in (API start, recording and execution log included)",
        f"assumed: steps succeed at their first attempt, each loop body runs once, each "
        f"for_each runs {standard.items} items, a step Lambda takes {standard.lambda_ms:g} ms "
        f"and other states {standard.state_ms:g} ms (the Express duration); Express logs "
        f"every history event ({DEFAULT_LOG_EVENT_BYTES} bytes each), Standard only errors",
        f"{'path':<9} {'transitions':>11} {'lambdas':>7} {'waits':>8} "
        + " ".join(f"{_header(engine, picked):>12}" for engine in ENGINES)
        + f" {'saving':>8}",
    ]
    for name, cost in (("cheapest", standard.cheapest), ("dearest", standard.dearest)):
        dollars = {engine: _found(standard, express, name, engine) for engine in ENGINES}
        lines.append(
            f"{name:<9} {cost.transitions:>11} {cost.lambda_invocations:>7} "
            f"{cost.wait_seconds:>7g}s "
            + " ".join(f"{'$' + format(dollars[e], ',.2f'):>12}" for e in ENGINES)
            + f" {dollars['standard'] / dollars['express']:>7.1f}x"
        )
    if express_asl is not None:
        lines.append(
            "transitions and lambdas are the Standard machine's; Express is priced on its own "
            "machine (the workflow in a _run Parallel with the native recording states)"
        )
    if choice is not None:
        lines.append(f"engine: auto picks {choice.engine} (*): {choice.reason}")
    lines.append(
        "Express runs at most 5 minutes, at least once, without an execution history: "
        "whether this workflow may use it is the engine choice's call (docs/engines.md)."
    )
    return "\n".join(lines) + "\n"


def _header(engine: Engine, picked: Engine | None) -> str:
    return f"{engine} *" if engine == picked else engine


def _found(standard: Estimate, express: Estimate, path: str, engine: Engine) -> float:
    return (standard if engine == "standard" else express).per_million(path, engine)
