"""``relayflow workflows list|get``: the tenant's workflows and their versions, over the
control API."""

from __future__ import annotations

from typing import Any

from relayflow.cli.api import api_commands, endpoint, list_command
from relayflow.cli.parsing import arg, command_group, page_arguments

cmd_workflows_list = list_command(
    "/workflows",
    ("workflow", "live", "latest", "engine", "enabled", "updated"),
    lambda w: (
        w["workflow_id"],
        str(w.get("live_version")),
        str(w.get("latest_version")),
        str(w.get("engine") or ""),
        "yes" if w.get("enabled", True) else "no",
        str(w.get("updated_at") or ""),
    ),
)


def _workflow_text(workflow: dict[str, Any]) -> str:
    """A workflow's line and one line per version, the live one marked."""
    lines = [
        f"workflow {workflow['workflow_id']} ({workflow.get('name') or 'no name'}): live version "
        f"{workflow.get('live_version')} of {workflow.get('latest_version')}, "
        f"{'enabled' if workflow.get('enabled', True) else 'disabled'}"
    ]
    for version in workflow.get("versions") or []:
        live = "  live" if version["version"] == workflow.get("live_version") else ""
        lines.append(f"  version {version['version']}  {version.get('created_at')}{live}")
    return "\n".join(lines)


cmd_workflows_get = endpoint("GET", "/workflows/{workflow_id}", _workflow_text)


#: ``relayflow workflows ...``: each command's name, help line, function and arguments.
_COMMANDS = (
    (
        "list",
        "workflows with their live and latest versions",
        cmd_workflows_list,
        *page_arguments(50),
    ),
    ("get", "one workflow and its versions", cmd_workflows_get, arg("workflow_id")),
)


def add_workflows_commands(sub: Any) -> None:
    """``relayflow workflows list|get``."""
    api_commands(command_group(sub, "workflows", "the tenant's workflows"), _COMMANDS)
