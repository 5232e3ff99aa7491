"""``--json`` answers of the file commands (``validate``, ``compile``, ``graph``, ``schedule
preview``): one JSON document on stdout, for scripts and editors, with the same exit codes as
the text output."""

from __future__ import annotations

from typing import Any


def validation(path: str, workflow: Any, problems: list[Any], warnings: list[Any]) -> dict:
    """One file's validation result."""
    return {
        "file": path,
        "valid": workflow is not None and not problems,
        "workflow_id": getattr(workflow, "id", None),
        "steps": len(workflow.steps) if workflow is not None else None,
        "problems": [p.to_dict() for p in problems],
        "warnings": [w.to_dict() for w in warnings],
    }


def compiled(workflow: Any, compiled_workflow: Any) -> dict:
    engine = compiled_workflow.engine
    return {
        "workflow_id": workflow.id,
        "engine": engine.engine if engine is not None else None,
        "engine_reason": engine.reason if engine is not None else None,
        "asl": compiled_workflow.asl,
        "iam_statements": compiled_workflow.iam_statements,
    }


def graph(workflow: Any) -> dict:
    from relayflow.compiler import to_mermaid
    from relayflow.console.graph import structure

    definition = workflow.model_dump(mode="json", exclude_none=True)
    return {"workflow_id": workflow.id, **structure(definition), "mermaid": to_mermaid(workflow)}


def schedule(
    cron: str, tz: str, expressions: list[str], times: list[Any], notes: list[Any]
) -> dict:
    return {
        "cron": cron,
        "timezone": tz,
        "scheduler_expressions": expressions,
        "fire_times": [
            {"at": t.isoformat(), "note": note} for t, note in zip(times, notes, strict=True)
        ],
    }
