"""The tool step: one call of a catalogue tool with args rendered from the state document."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relayflow.errors import InvalidArgsError
from relayflow.expressions import render
from relayflow.steps import dry_run
from relayflow.steps.task import parse_task, result
from relayflow.tools.catalogue import run_tool, would_call


def run(event: Any) -> dict[str, Any]:
    """Render ``config.args`` against the document, call ``config.tool``; the tool's result
    is the step's output. HTTP tools use the declaration baked in ``config.http_tool``. With
    ``config.breaker`` the call goes through the tenant's ``tool:<tool>`` circuit breaker
    (:mod:`relayflow.reliability.breakers`): ``Relayflow.CircuitOpen`` while it is open.
    In a dry run the call is only recorded (:mod:`relayflow.steps.dry_run`), unless the step
    says ``dry_run: read``."""
    task = parse_task(event)
    config = task.step.config
    tool = config.get("tool")
    if not isinstance(tool, str) or not tool:
        raise InvalidArgsError(f"step {task.step.key!r} names no tool", step=task.step.key)
    args = render(config.get("args", {}), task.doc)
    if dry_run.is_dry_run(task.doc):
        if config.get("dry_run") == "read":
            # The author vouches that it only reads: it runs, outside any breaker.
            output = run_tool(tool, args, doc=task.doc, http_tool=config.get("http_tool"))
            answer = result(output, task=task)
            answer["dry_run"] = {"simulated": False, "read": True}
            return answer
        would = would_call(tool, args, doc=task.doc, http_tool=config.get("http_tool"))
        return dry_run.simulated(task, would)
    output = call_tool(tool, args, task.doc, config.get("http_tool"), config.get("breaker"))
    return result(output, task=task)


def call_tool(tool: str, args: Any, doc: Mapping[str, Any], http_tool: Any, breaker: Any) -> Any:
    """One tool call as a tool step makes it (an agent's tool calls come through here too):
    the catalogue dispatch (SSRF-guarded for HTTP tools), through the tenant's
    ``tool:<tool>`` breaker when ``breaker`` settings are given. In a dry run nothing is
    called: the answer describes the call that would have been made."""

    def call() -> Any:
        return run_tool(tool, args, doc=doc, http_tool=http_tool)

    if dry_run.is_dry_run(doc):
        # An agent's tool call in a dry run: nothing acts; the model is told what would have.
        return {
            "dry_run": True,
            "simulated": True,
            "call": would_call(tool, args, doc=doc, http_tool=http_tool),
        }
    if breaker:
        # Only then: a step without a breaker loads no breaker code and reads no table.
        from relayflow.reliability.breakers import guard_tool_call

        return guard_tool_call(doc, tool, breaker, call)
    return call()
