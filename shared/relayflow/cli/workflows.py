"""``relayflow workflows list|get``: the tenant's workflows and their versions, over the
control API."""

from __future__ import annotations

import argparse
from typing import Any

from relayflow.cli.api import api_command, endpoint, list_page, page_query
from relayflow.cli.parsing import arg, command_group, page_arguments


def cmd_workflows_list(args: argparse.Namespace) -> int:
    return list_page(
        args,
        "/workflows",
        page_query(args),
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


def add_workflows_commands(sub: Any) -> None:
    """``relayflow workflows list|get``."""
    workflows = command_group(sub, "workflows", "the tenant's workflows")
    api_command(
        workflows,
        "list",
        "workflows with their live and latest versions",
        cmd_workflows_list,
        *page_arguments(50),
    )
    api_command(
        workflows, "get", "one workflow and its versions", cmd_workflows_get, arg("workflow_id")
    )
