"""Definitions on disk, for the file commands: load one, and find the child workflows a
definition starts among the definitions in a folder (``run`` runs them, ``validate`` sizes
their outputs)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from relayflow.cli.output import UsageError
from relayflow.definition import DefinitionError

if TYPE_CHECKING:
    from relayflow.definition import Workflow


def load_workflow(path: str | Path) -> Workflow:
    """:func:`relayflow.validation.load_workflow`, imported on first use (it brings in the
    models, YAML and the expression language)."""
    from relayflow.validation import load_workflow as load

    return load(path)


def sub_workflows(workflow: Workflow, directory: Path) -> dict[str, Workflow]:
    """The workflows ``workflow``'s sub_workflow steps and agent workflow tools start (and
    theirs, in turn), found by ``id`` among the definitions in ``directory``. Files that do
    not load are skipped unless one of them is needed."""
    wanted = children_of(workflow)
    # A templated target may be any of them: every definition in the folder is published.
    dynamic = any("{{" in workflow_id for workflow_id in wanted)
    wanted = {workflow_id for workflow_id in wanted if "{{" not in workflow_id}
    if not wanted - {workflow.id} and not dynamic:
        return {}
    available: dict[str, Workflow] = {}
    for path in sorted(directory.glob("*")):
        if path.suffix not in (".yaml", ".yml", ".json"):
            continue
        try:
            found = load_workflow(path)
        except (DefinitionError, OSError):
            continue
        available.setdefault(found.id, found)
    if dynamic:
        return {k: v for k, v in available.items() if k != workflow.id}
    found_all: dict[str, Workflow] = {}
    pending = sorted(wanted - {workflow.id})
    while pending:
        workflow_id = pending.pop()
        if workflow_id in found_all:
            continue
        if workflow_id not in available:
            raise UsageError(
                f"sub_workflow names workflow '{workflow_id}': no definition with that id in "
                f"{directory} (choose the folder with --workflows)"
            )
        child = found_all[workflow_id] = available[workflow_id]
        pending += sorted(children_of(child))
    return found_all


def children_of(workflow: Workflow) -> set[str]:
    """The ids of the workflows a definition starts: sub_workflow targets (templated ones as
    they are) and agents' ``workflow.<id>`` tools."""
    from relayflow.validation.children import child_workflows

    return {child.workflow_id for child in child_workflows(workflow)}
