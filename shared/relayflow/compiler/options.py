"""What the compiler is told (:class:`CompileOptions`) and what it returns
(:class:`CompiledWorkflow`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from relayflow import naming

if TYPE_CHECKING:
    from relayflow.compiler.engine import EngineChoice


def local_state_machine_name(workflow_id: str) -> str:
    """The state machine the local runner (``relayflow run``) creates for a workflow."""
    return f"relayflow-{workflow_id}"


@dataclass(frozen=True)
class CompileOptions:
    """Deployment facts the compiler needs. ``function_arns`` maps a function kind
    (``condition``, ``transform``…) to its ARN; missing kinds follow :mod:`relayflow.naming`.
    ``state_machine_name`` maps a workflow id to its state machine's name (the target of a
    sub_workflow step): the control plane passes its per-stage, per-tenant naming."""

    function_arns: Mapping[str, str] = field(default_factory=dict)
    region: str = naming.LOCAL_REGION
    account: str = naming.LOCAL_ACCOUNT
    state_machine_name: Callable[[str], str] = local_state_machine_name
    #: The payload bucket: distributed for_each steps write their results under for_each/.
    payload_bucket: str = "relayflow-payloads"
    #: The Relayflow table, where an Express machine records its run's end.
    table_name: str = "relayflow"
    #: The target runs Express machines (the control plane, the local runtime): a workflow
    #: whose engine is Express compiles with native recording. Off (the sizing check, the
    #: golden files), every workflow compiles for Standard; ``engine`` still says the choice.
    express: bool = False
    #: Workflow id → its declared ``input_schema``, for the workflows the agents run as
    #: tools (the tools' argument schemas); resolved by the control plane or the local runner.
    workflow_input_schemas: Mapping[str, Any] = field(default_factory=dict)
    #: sub_workflow step key → its (literal) target's ``input_schema``: the step checks the
    #: child's input before starting it (``<key>.check_input``).
    sub_workflow_input_schemas: Mapping[str, Any] = field(default_factory=dict)

    def arn(self, kind: str) -> str:
        return self.function_arns.get(kind) or naming.function_arn(kind, self.region, self.account)

    def state_machine_arn(self, workflow_id: str) -> str:
        name = self.state_machine_name(workflow_id)
        return f"arn:aws:states:{self.region}:{self.account}:stateMachine:{name}"


@dataclass
class CompiledWorkflow:
    asl: dict[str, Any]
    #: IAM policy statements the state machine's execution role needs.
    iam_statements: list[dict[str, Any]]
    #: step key → "native" (no Lambda) or the function kind that runs it.
    step_runners: dict[str, str]
    #: The engine the machine is for (Express machines record their own end).
    engine: EngineChoice | None = None

    @property
    def iam_actions(self) -> list[str]:
        return sorted({a for s in self.iam_statements for a in s["Action"]})

    @property
    def functions(self) -> list[str]:
        return sorted({r for r in self.step_runners.values() if r != "native"})
