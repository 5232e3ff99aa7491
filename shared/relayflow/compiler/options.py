"""What the compiler is told (:class:`CompileOptions`) and what it returns
(:class:`CompiledWorkflow`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from relayflow import naming


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

    @property
    def iam_actions(self) -> list[str]:
        return sorted({a for s in self.iam_statements for a in s["Action"]})

    @property
    def functions(self) -> list[str]:
        return sorted({r for r in self.step_runners.values() if r != "native"})
