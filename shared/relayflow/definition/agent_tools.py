"""Which tools an agent step may call, read from its declaration alone (no AI code): the
gating of ``tools`` / ``allowed_tools`` / ``blocked_tools`` (see :mod:`relayflow.ai.tools`,
which enforces it) and the ``workflow.<id>`` tools that run another workflow of the tenant.

Below the compiler, which compiles an agent's workflow tools into child-run states, and the
definition checks that find a workflow's children; the agent runtime imports it too."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: The prefix of a tool that runs another workflow of the tenant (``workflow.<id>``).
WORKFLOW_TOOL_PREFIX = "workflow."
_WORKFLOW_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def workflow_tool_id(tool: str) -> str | None:
    """The workflow id a ``workflow.<id>`` tool runs; ``None`` for any other tool."""
    if not tool.startswith(WORKFLOW_TOOL_PREFIX):
        return None
    return tool.removeprefix(WORKFLOW_TOOL_PREFIX)


def valid_workflow_tool(tool: str) -> bool:
    """Whether a ``workflow.<id>`` name holds a well-formed workflow id."""
    workflow_id = workflow_tool_id(tool)
    return workflow_id is not None and bool(_WORKFLOW_ID.match(workflow_id))


def workflow_tools(config: Mapping[str, Any]) -> list[str]:
    """The ids of the workflows an agent step may run as tools (gating applied)."""
    permitted = permitted_tools(
        config.get("tools"), config.get("allowed_tools"), config.get("blocked_tools")
    )
    return [w for t in permitted if (w := workflow_tool_id(t)) is not None]


def permitted_tools(
    tools: list[str] | None, allowed: list[str] | None, blocked: list[str] | None
) -> list[str]:
    """The tools an agent may call, in declaration order: ``tools`` lists the catalogue tools
    it knows (without it, ``allowed_tools`` is that list); with ``allowed_tools``, only the
    tools in it; never a tool in ``blocked_tools``."""
    candidates = list(tools if tools is not None else allowed or [])
    if allowed is not None:
        candidates = [t for t in candidates if t in allowed]
    denied = set(blocked or [])
    return [t for t in dict.fromkeys(candidates) if t not in denied]
