"""The custom step: POST the step context to a user's URL and route on the answer.

Request (JSON, signed like webhook_out when ``secret`` is set)::

    {"step_key", "run_id", "workflow_id", "input": <payload_config rendered>,
     "payload_config": <payload_config as declared>, "steps": {...}, "trigger": ...}

A JSON object answer may name a branch: ``{"branch": "approve", ...}``. A declared branch
routes there; the rest of the object is the output. An undeclared name takes the default
route (``on_success``) and the output carries ``"unknown_branch": <name>``. Any other answer
is the output as it is, on the default route.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relayflow.expressions import render
from relayflow.steps.delivery import prepare, timeout_of
from relayflow.steps.effects import Effects
from relayflow.steps.task import parse_task, result


def declared_branches(config: Mapping[str, Any]) -> frozenset[str]:
    """Branch names the compiler baked into the config (a list, or a name → step map)."""
    branches = config.get("branches") or ()
    return frozenset(str(name) for name in branches)


def route(answer: Any, branches: frozenset[str]) -> tuple[Any, str | None]:
    """``(output, branch)`` for the receiver's parsed answer."""
    if not isinstance(answer, dict) or "branch" not in answer:
        return answer, None
    output = dict(answer)
    name = output.pop("branch")
    if name is None:
        return output, None
    if isinstance(name, str) and name in branches:
        return output, name
    output["unknown_branch"] = name
    return output, None


def run(event: Any, effects: Effects) -> dict[str, Any]:
    """Send the step context, return the answer as output and its branch (when declared)."""
    from relayflow.net.http import parse_body

    task = parse_task(event)
    config = task.step.config
    doc = task.doc
    run_info = doc.get("run") or {}
    payload_config = config.get("payload_config") or {}
    context = {
        "step_key": task.step.key,
        "run_id": run_info.get("id"),
        "workflow_id": run_info.get("workflow_id"),
        "input": render(payload_config, doc),
        "payload_config": payload_config,
        "steps": doc.get("steps") or {},
        "trigger": doc.get("trigger"),
    }
    delivery = prepare(
        task,
        method="POST",
        url=render(config.get("url"), doc),
        headers=render(config.get("headers") or {}, doc),
        body=context,
        secret=config.get("secret"),
    )

    def answer(response: Any) -> dict[str, Any]:
        output, branch = route(parse_body(response), declared_branches(config))
        return result(output, branch, task=task)

    return effects.deliver(task, delivery, timeout=timeout_of(config), answer=answer)
