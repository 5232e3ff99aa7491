"""The workflows a definition starts as child runs: its ``sub_workflow`` targets and its
agents' ``workflow.<id>`` tools. The control plane checks they exist for the tenant; the
local ``relayflow run`` publishes them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ChildRef:
    """One workflow a step starts: ``path`` names where (``steps.<key>.workflow_id`` or
    ``steps.<key>.tools``), ``version`` is a pinned version or ``None`` (``live``)."""

    step_key: str
    path: str
    workflow_id: str
    version: int | None = None

    @property
    def templated(self) -> bool:
        """A sub_workflow target rendered at run time (any workflow of the tenant)."""
        return "{{" in self.workflow_id


def child_workflows(workflow: Any) -> list[ChildRef]:
    """Every workflow ``workflow``'s steps start, in step order."""
    from relayflow.ai.tools import workflow_tools

    found: list[ChildRef] = []
    for key, step in workflow.steps.items():
        if step.type == "sub_workflow":
            found.append(ChildRef(key, f"steps.{key}.workflow_id", step.workflow_id, step.version))
        elif step.type == "agent":
            found += [
                ChildRef(key, f"steps.{key}.tools", workflow_id)
                for workflow_id in workflow_tools(step.model_dump(exclude_none=True))
            ]
    return found
