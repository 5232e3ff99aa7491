"""The workflows a definition starts as child runs: its ``sub_workflow`` targets and its
agents' ``workflow.<id>`` tools. The control plane checks they exist for the tenant; the
local ``relayflow run`` publishes them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
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
    from relayflow.definition.agent_tools import workflow_tools

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


def child_input_schemas(
    workflow: Any, lookup: Callable[[str], Mapping[str, Any] | None]
) -> dict[str, dict[str, Any]]:
    """The declared ``input_schema`` of each workflow ``workflow``'s agents run as tools, by
    id (those without one are left out). ``lookup(id)`` gives a child's definition (a model
    or its JSON) or ``None``; the workflow itself answers for its own id. The control plane
    looks children up among the tenant's live versions when the parent is published, the
    local runner among the definitions it publishes."""
    schemas: dict[str, dict[str, Any]] = {}
    for child in child_workflows(workflow):
        if not child.path.endswith(".tools") or child.workflow_id in schemas:
            continue
        found = workflow if child.workflow_id == workflow.id else lookup(child.workflow_id)
        declared = _declared_input_schema(found)
        if isinstance(declared, dict):
            schemas[child.workflow_id] = declared
    return schemas


def sub_workflow_input_schemas(
    workflow: Any, lookup: Callable[[str, int | None], Mapping[str, Any] | None]
) -> dict[str, dict[str, Any]]:
    """The ``input_schema`` of the child each ``sub_workflow`` step with a literal target
    starts, by step key (templated targets and children without one are left out).
    ``lookup(id, version)`` gives the definition of a pinned version, or of the live one for
    ``None``; the workflow itself answers for its own id when not pinned."""
    schemas: dict[str, dict[str, Any]] = {}
    for child in child_workflows(workflow):
        if not child.path.endswith(".workflow_id") or child.templated:
            continue
        if child.workflow_id == workflow.id and child.version is None:
            found: Any = workflow
        else:
            found = lookup(child.workflow_id, child.version)
        declared = _declared_input_schema(found)
        if isinstance(declared, dict):
            schemas[child.step_key] = declared
    return schemas


def _declared_input_schema(found: Any) -> Any:
    """The ``input_schema`` of a child's definition (a model or its JSON), if any."""
    if isinstance(found, Mapping):
        return found.get("input_schema")
    return getattr(found, "input_schema", None)
