"""Saga compensation, compiled to native states (``docs/reliability.md``).

A workflow with a compensated step (``compensate:`` on a main-flow step, or on the item step
of a main-flow ``for_each``) carries ``$.saga = {"todo": <list>, "done": <list>}``. ASL has no
intrinsic that appends to an array, so both are linked lists: ``{}`` is empty, a node is
``{"key": <step>, …, "prev": <list>}`` (newest first).

* ``_saga.init`` (the first state) sets both lists empty.
* ``<key>.saga``, a ``Pass`` after the compensated step succeeded, pushes
  ``{"key", "output"?, "prev"}`` onto ``todo`` (the output only when the compensation reads
  it; a ``for_each`` pushes its item records). The order of the list is the order of
  completion, whatever liveness later drops from ``$.steps``.
* The run's failure path: every main-flow ``Task``, ``Map`` and ``Parallel`` that would let an
  error end the run catches it into ``$.error`` and goes to ``_saga.next``; every main-flow
  ``Fail`` becomes a ``Pass`` that puts its error there and goes there too. So a failure
  anywhere (the workflow's error handler included) walks the list exactly once.
* ``_saga.next`` (a ``Choice`` on the head's key) → ``_saga.<key>`` (the compensation: a
  ``Task``, or for a ``for_each`` a ``Map`` running it per succeeded item) →
  ``_saga.<key>.ok`` / ``_saga.<key>.failed`` (a ``Pass`` that pops ``todo`` and pushes the
  result onto ``done``) → ``_saga.next``. A compensation's failure is caught and recorded,
  never compensated, and the walk goes on.
* When ``todo`` is empty: nothing compensated → ``_saga.raise`` fails the run with the
  original error; otherwise ``_saga.report`` puts ``{"cause": <original cause>,
  "compensation": <done list>}`` beside the error and ``_saga.fail`` fails the run with the
  original error name and that report (JSON) as the cause.
  :func:`relayflow.control.compensation.split_cause` turns it back into the original cause
  and the run's ``compensation`` record.

Compensation Tasks invoke the compensation's step function with the step key
``<key>.compensate``, so its idempotency record (per run, step and for_each item) is its own:
a compensation acts once. Their document holds ``run``, ``trigger``, ``output`` (the
compensated step's output, also as ``steps.<key>.output``) and, per item, ``index``.
"""

from __future__ import annotations

from typing import Any

from relayflow.compiler.asl import LAMBDA_INVOKE
from relayflow.compiler.emitter import Compilation, Emitter
from relayflow.compiler.liveness import TEMPLATE_FIELDS
from relayflow.compiler.states import (
    Choice,
    Fail,
    Map,
    Parallel,
    Pass,
    ScopeMachine,
    State,
    Task,
    carry_through,
)
from relayflow.definition.step_models import compensation_call
from relayflow.document import StepRef, task_parameters
from relayflow.expressions import expression_paths, template_expressions

SAGA = "$.saga"
NEXT = "_saga.next"
INIT = "_saga.init"
#: The suffix of a compensation's step key (its idempotency record and request headers).
STEP_SUFFIX = ".compensate"


def compensated_steps(driver: Compilation) -> dict[str, str]:
    """Main-flow steps whose success is recorded for compensation: compensated step → the step
    whose ``compensate`` applies (itself, or a for_each's item step)."""
    found: dict[str, str] = {}
    for key in driver.scopes[0].steps if driver.scopes else []:
        step = driver.wf.steps[key]
        if getattr(step, "compensate", None) is not None:
            found[key] = key
        elif step.type == "for_each" and getattr(driver.wf.steps[step.step], "compensate", None):
            found[key] = step.step
    return found


def reads_output(call: Any) -> bool:
    """Whether a compensation call's templates read the compensated step's output."""
    if call.type == "custom":
        return True  # a custom call sends the document it gets
    for name in TEMPLATE_FIELDS.get(call.type, ()):
        for src in template_expressions(getattr(call, name, None)):
            if any(ref and ref[0] in ("output", "steps") for ref in expression_paths(src)):
                return True
    return False


def with_compensation(ctx: Emitter) -> ScopeMachine:
    """Add compensation to the compiled main flow ``ctx.machine`` (see the module docstring);
    unchanged when no step is compensated."""
    driver, machine = ctx.c, ctx.machine
    # Steps only an unrouted error handler leads to were not compiled (driver).
    compensated = {k: o for k, o in compensated_steps(driver).items() if k in machine.states}
    if not compensated or not _can_fail(machine):
        return machine
    calls = {
        key: compensation_call(driver.wf.steps[owner], driver.wf.steps)
        for key, owner in compensated.items()
    }
    pushes = {
        key: _push_after(machine, key, key != owner or reads_output(calls[key]))
        for key, owner in compensated.items()
    }
    # Each push right after its step's states, so the definition reads in flow order.
    ordered: dict[str, Any] = {}
    for name, state in machine.states.items():
        ordered[name] = state
        push = pushes.get(name)
        if push is not None:
            ordered[f"{name}.saga"] = push
    machine.states = ordered
    _route_failures(machine)
    walk = ScopeMachine(NEXT)
    for key, owner in compensated.items():
        if key == owner:
            _compensation_task(driver, ctx, walk, key, calls[key])
        else:
            _compensation_map(driver, ctx, walk, key, owner, calls[key])
    _walk(walk, list(compensated))
    states = {INIT: Pass(result={"todo": {}, "done": {}}, result_path=SAGA, next=machine.start_at)}
    return ScopeMachine(INIT, {**states, **machine.states, **walk.states})


# --------------------------------------------------------------------------- the main flow


def _push_after(machine: ScopeMachine, key: str, with_output: bool) -> Pass | None:
    """The ``<key>.saga`` push, wired on the success exit of step ``key``'s main state (after
    an agent's suspension Choice ``<key>.await``, when it has one); the caller adds it to the
    machine. A step that ends the run needs none."""
    state = machine.states[key]
    holder: Any = state
    attr = "next"
    gate = machine.states.get(f"{key}.await")
    if isinstance(gate, Choice) and getattr(state, "next", None) == f"{key}.await":
        holder, attr = gate, "default"
    onward = getattr(holder, attr)
    if onward is None:
        return None
    node: dict[str, Any] = {"key": key}
    if with_output:
        node["output.$"] = f"$.steps.{key}.output"
    node["prev.$"] = f"{SAGA}.todo"
    setattr(holder, attr, f"{key}.saga")
    return Pass(parameters=node, result_path=f"{SAGA}.todo", next=onward)


def _uncaught(state: State) -> bool:
    """A state whose error would end the run: it can catch, and nothing catches every error."""
    return isinstance(state, Task | Map | Parallel) and not any(
        "States.ALL" in rule["ErrorEquals"] for rule in state.catch
    )


def _can_fail(machine: ScopeMachine) -> bool:
    """Whether some error can end the run (else every failure has a route, and nothing is
    ever compensated: the walk would be a set of states nothing enters)."""
    return any(_uncaught(s) or isinstance(s, Fail) for s in machine.states.values())


def _route_failures(machine: ScopeMachine) -> None:
    """Send every way the main flow can fail to the walk; carry ``saga`` through the states
    that rebuild the whole document (a Parallel's merge)."""
    catch_all = {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": NEXT}
    for name, state in list(machine.states.items()):
        if _uncaught(state):
            state.catch.append(dict(catch_all))  # type: ignore[attr-defined]
        if isinstance(state, Fail):
            machine.states[name] = _to_walk(state)
    carry_through(machine, "saga")


def _to_walk(fail: Fail) -> Pass:
    """A ``Fail`` of the main flow as the ``Pass`` that hands its error to the walk."""
    if fail.error_path is not None:
        cause = {"Cause.$": fail.cause_path} if fail.cause_path else {"Cause": ""}
        return Pass(
            parameters={"Error.$": fail.error_path, **cause}, result_path="$.error", next=NEXT
        )
    return Pass(
        result={"Error": fail.error or "States.TaskFailed", "Cause": fail.cause or ""},
        result_path="$.error",
        next=NEXT,
    )


# --------------------------------------------------------------------------- the walk


def _done(key: str, extra: dict[str, Any]) -> Pass:
    """Pop ``todo``, push ``{"key", **extra}`` onto ``done``, back to the walk."""
    return Pass(
        parameters={
            "todo.$": f"{SAGA}.todo.prev",
            "done": {"key": key, **extra, "prev.$": f"{SAGA}.done"},
        },
        result_path=SAGA,
        next=NEXT,
    )


def _invoke(driver: Compilation, ctx: Emitter, owner: str, call: Any, doc: dict[str, Any]) -> Task:
    """The Lambda Task running compensation ``call`` of step ``owner`` on document ``doc``."""
    driver.runners[f"_saga.{owner}"] = call.type
    ref = StepRef(key=f"{owner}{STEP_SUFFIX}", type=call.type, config=ctx.step_config(call))
    parameters = task_parameters(driver.options.arn(call.type), ref)
    payload = parameters["Payload"]
    del payload["doc.$"]
    parameters["Payload"] = {"step": payload.pop("step"), "doc": doc, **payload}
    return Task(
        resource=LAMBDA_INVOKE,
        parameters=parameters,
        result_selector={"status": "compensated"},
        result_path=f"{SAGA}.last",
        timeout_seconds=call.timeout_seconds,
        retry=ctx.retriers(call.retry, flow_controlled=bool(call.concurrency or call.rate_limit)),
    )


def _compensation_task(
    driver: Compilation, ctx: Emitter, walk: ScopeMachine, key: str, call: Any
) -> None:
    output = f"{SAGA}.todo.output"
    doc: dict[str, Any] = {"run.$": "$.run", "trigger.$": "$.trigger"}
    if reads_output(call):
        doc |= {"steps": {key: {"output.$": output, "status": "succeeded"}}, "output.$": output}
    task = _invoke(driver, ctx, key, call, doc)
    ok, failed = f"_saga.{key}.ok", f"_saga.{key}.failed"
    task.catch = [{"ErrorEquals": ["States.ALL"], "ResultPath": f"{SAGA}.error", "Next": failed}]
    task.next = ok
    walk.add(f"_saga.{key}", task)
    walk.add(ok, _done(key, {}))
    walk.add(failed, _done(key, {"error.$": f"{SAGA}.error"}))


def _compensation_map(
    driver: Compilation,
    ctx: Emitter,
    walk: ScopeMachine,
    key: str,
    owner: str,
    call: Any,
) -> None:
    """A for_each's compensation: a Map over its item records that runs the item step's
    compensation for each item that succeeded; each item answers ``{"index"}`` or
    ``{"index", "error"}``."""
    # Named like no step can be (the timeline folds states into steps by name), unique in
    # the machine (every item processor's names count), within 80 characters.
    check, run, ok, failed, skip = (
        f"_saga.{key}.{n}" for n in ("check", "run", "undone", "error", "skip")
    )
    output = "$.record.output"
    doc = {
        "run.$": "$.run",
        "trigger.$": "$.trigger",
        "steps": {owner: {"output.$": output, "status": "succeeded"}},
        "output.$": output,
        "index.$": "$.index",
    }
    task = _invoke(driver, ctx, owner, call, doc)
    task.result_path = "$.result"
    task.catch = [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": failed}]
    task.next = ok
    item = ScopeMachine(check)
    item.add(
        check,
        Choice(
            choices=[{"Variable": "$.record.status", "StringEquals": "succeeded", "Next": run}],
            default=skip,
        ),
    )
    item.add(run, task)
    item.add(ok, Pass(parameters={"index.$": "$.index"}, end=True))
    item.add(failed, Pass(parameters={"index.$": "$.index", "error.$": "$.error"}, end=True))
    item.add(skip, Pass(parameters={"index.$": "$.index", "skipped": True}, end=True))
    each = driver.wf.steps[key]
    done_ok, done_failed = f"_saga.{key}.ok", f"_saga.{key}.failed"
    walk.add(
        f"_saga.{key}",
        Map(
            items_path=f"{SAGA}.todo.output",
            item_selector={
                "run.$": "$.run",
                "trigger.$": "$.trigger",
                "record.$": "$$.Map.Item.Value",
                "index.$": "$$.Map.Item.Index",
            },
            max_concurrency=getattr(each, "max_concurrency", 0) or None,
            item_processor=item,
            result_path=f"{SAGA}.items",
            catch=[
                {"ErrorEquals": ["States.ALL"], "ResultPath": f"{SAGA}.error", "Next": done_failed}
            ],
            next=done_ok,
        ),
    )
    walk.add(done_ok, _done(key, {"items.$": f"{SAGA}.items"}))
    walk.add(done_failed, _done(key, {"error.$": f"{SAGA}.error"}))


def _walk(walk: ScopeMachine, keys: list[str]) -> None:
    """``_saga.next`` and the states that end the failed run."""
    head = f"{SAGA}.todo.key"
    walk.add(
        NEXT,
        Choice(
            choices=[
                {"Not": {"Variable": head, "IsPresent": True}, "Next": "_saga.end"},
                *({"Variable": head, "StringEquals": k, "Next": f"_saga.{k}"} for k in keys),
            ],
            default="_saga.end",
        ),
    )
    walk.add(
        "_saga.end",
        Choice(
            choices=[{"Variable": f"{SAGA}.done.key", "IsPresent": True, "Next": "_saga.report"}],
            default="_saga.raise",
        ),
    )
    walk.add("_saga.raise", Fail(error_path="$.error.Error", cause_path="$.error.Cause"))
    walk.add(
        "_saga.report",
        Pass(
            parameters={
                "Error.$": "$.error.Error",
                "report": {"cause.$": "$.error.Cause", "compensation.$": f"{SAGA}.done"},
            },
            result_path="$.error",
            next="_saga.fail",
        ),
    )
    walk.add(
        "_saga.fail",
        Fail(error_path="$.error.Error", cause_path="States.JsonToString($.error.report)"),
    )
