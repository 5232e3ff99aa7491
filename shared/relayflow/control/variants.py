"""The step-through and rerun variants of a stored version, each published on first use.

A *step-through variant* (:mod:`relayflow.compiler.debug`) is the version's compiled machine
with a gate before each step; a *rerun variant* (:mod:`relayflow.compiler.rerun`) the same
machine with a Choice at the top that starts at ``$.rerun.from_step``. Each is published as
one more version of the workflow's state machine the first time a run needs it and recorded
on the version item; normal runs never touch either. An Express workflow's step-through
variant is published on a Standard sibling machine (:func:`step_through_machine_name`), since
Express has no callbacks.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from relayflow.control.errors import InvalidDefinition
from relayflow.control.lookups import find_version
from relayflow.control.ports import Ports
from relayflow.dal import VersionItem, WorkflowItem

if TYPE_CHECKING:
    from relayflow.definition import Workflow
    from relayflow.definition.graph import StepGraph


def step_through_machine_name(stage: str, tenant: str, workflow_id: str) -> str:
    """The Standard machine that runs the step-through variants of an Express workflow
    (``<workflow_id>.step``: workflow ids hold no ``.``, so it names no workflow's machine)."""
    from relayflow.executions.stepfunctions import state_machine_name

    return state_machine_name(stage, tenant, f"{workflow_id}.step")


def stored_workflow(item: VersionItem) -> Workflow:
    """The validated definition of a stored version, to compile one of its variants from.
    It was valid when it was published; an engine that no longer accepts it says why
    (:class:`InvalidDefinition`)."""
    from relayflow.validation import validate_data

    workflow, problems = validate_data(json.loads(item.definition))
    if workflow is None:
        raise InvalidDefinition.from_problems(problems)
    return workflow


def main_flow_steps(item: VersionItem) -> list[str]:
    """The steps of a version's main flow (the ones a rerun may start at), in flow order."""
    scopes, _ = step_graph(item).scopes()
    return list(scopes[0].steps) if scopes else []


def step_graph(item: VersionItem) -> StepGraph:
    """The step graph of a stored version's definition."""
    from relayflow.definition.graph import StepGraph

    definition = json.loads(item.definition)
    on_failure = (definition.get("errors") or {}).get("on_failure")
    return StepGraph(definition.get("steps") or {}, str(definition.get("start") or ""), on_failure)


def step_through_target(ports: Ports, head: WorkflowItem, version: int) -> str:
    """The version ARN of ``version``'s step-through variant, published on first use."""
    # Publishing a variant compiles: its modules load here, not with the API's routes.
    from relayflow.control.compiled import check_compiled
    from relayflow.control.engines import compile_options
    from relayflow.control.machine_config import machine_config

    item = find_version(ports.dal, head.tenant, head.workflow_id, version)
    if item.step_through_version_arn:
        return item.step_through_version_arn
    from relayflow.compiler.debug import step_through_variant

    # The variant is a Standard machine's: its gates are callback Tasks.
    options = replace(compile_options(head.tenant, head), express=False)
    workflow, asl = _compiled(item, options)
    # The gates are served by the waitpoint function (step type ``step_gate``).
    variant = step_through_variant(asl, workflow.steps, options.arn("waitpoint"))
    check_compiled(variant, what="the step-through variant (a gate before every step)")
    definition = json.dumps(variant, separators=(",", ":"))
    description = _description(head, item, "step-through")
    if head.engine == "express":
        from relayflow.settings import get_settings

        settings = get_settings()
        # An Express machine has no callbacks: the variant runs on a Standard sibling.
        name = step_through_machine_name(settings.stage, head.tenant, head.workflow_id)
        _, arn = ports.machines.create(
            name,
            definition,
            **machine_config(head.tenant, workflow),
            description=description,
            tags={"relayflow:tenant": head.tenant, "relayflow:workflow": head.workflow_id},
        )
    else:
        arn = ports.machines.update(
            head.state_machine_arn,
            definition,
            **machine_config(head.tenant, workflow),
            description=description,
        )
    ports.dal.set_step_through_version(head.tenant, head.workflow_id, item.version, arn)
    return arn


def rerun_target(ports: Ports, head: WorkflowItem, version: int) -> str:
    """The version ARN of ``version``'s rerun variant, published on first use."""
    # Publishing a variant compiles: its modules load here, not with the API's routes.
    from relayflow.control.compiled import check_compiled
    from relayflow.control.engines import compile_options
    from relayflow.control.machine_config import machine_config

    item = find_version(ports.dal, head.tenant, head.workflow_id, version)
    if item.rerun_version_arn:
        return item.rerun_version_arn
    from relayflow.compiler.rerun import rerun_variant

    workflow, asl = _compiled(item, compile_options(head.tenant, head))
    variant = rerun_variant(asl, main_flow_steps(item))
    check_compiled(variant, what="the rerun variant (a Choice that starts at a step)")
    arn = ports.machines.update(
        head.state_machine_arn,
        json.dumps(variant, separators=(",", ":")),
        **machine_config(head.tenant, workflow),
        description=_description(head, item, "rerun from a step"),
    )
    ports.dal.set_rerun_version(head.tenant, head.workflow_id, item.version, arn)
    return arn


def _compiled(item: VersionItem, options: Any) -> tuple[Workflow, dict[str, Any]]:
    """The stored version's workflow and its machine compiled with ``options``."""
    from relayflow.compiler import compile_workflow

    workflow = stored_workflow(item)
    return workflow, compile_workflow(workflow, options).asl


def _description(head: WorkflowItem, item: VersionItem, variant: str) -> str:
    return f"Relayflow {head.tenant}/{head.workflow_id} version {item.version} ({variant})"
