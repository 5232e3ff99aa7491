"""A Mermaid flowchart of a workflow's steps and routes (``relayflow graph``)."""

from __future__ import annotations

from relayflow.definition.graph import StepGraph
from relayflow.definition.models import Workflow

#: Node shape per step type: (open, close).
_SHAPES = {
    "condition": ("{", "}"),
    "delay": ("([", "])"),
    "parallel": ("[[", "]]"),
    "for_each": ("[[", "]]"),
    "noop": ("((", "))"),
}


def _label(text: str) -> str:
    return text.replace('"', "'")


def to_mermaid(workflow: Workflow) -> str:
    raw = {k: s.model_dump(mode="json", exclude_none=True) for k, s in workflow.steps.items()}
    graph = StepGraph(raw, workflow.start, workflow.errors.on_failure)
    lines = ["flowchart TD", "    _start((start))", f"    _start --> {workflow.start}"]
    for key, step in workflow.steps.items():
        open_, close = _SHAPES.get(step.type, ("[", "]"))
        title = step.name or key
        lines.append(f'    {key}{open_}"{_label(title)}<br/><small>{step.type}</small>"{close}')
    for key in workflow.steps:
        for edge in graph.edges[key]:
            if edge.kind == "on_success":
                lines.append(f"    {key} --> {edge.target}")
            elif edge.kind == "on_failure":
                lines.append(f"    {key} -. on_failure .-> {edge.target}")
            elif edge.is_containment:
                label = "each item" if edge.kind == "step" else "branch"
                lines.append(f"    {key} == {label} ==> {edge.target}")
            else:
                name = edge.kind.removeprefix("on_").removeprefix("branch:")
                lines.append(f"    {key} -- {_label(name)} --> {edge.target}")
    return "\n".join(lines) + "\n"
