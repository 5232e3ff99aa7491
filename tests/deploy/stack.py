"""template.yaml loaded once for the offline deploy tests: its resources, its functions by
folder, and resolvers for the dev and prod stages (see ``sam_template``)."""

from __future__ import annotations

from typing import Any

from sam_template import Resolver, function_resources, load_template

TEMPLATE = load_template()
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
FUNCTIONS = function_resources(TEMPLATE)
DEV = Resolver(TEMPLATE, Stage="dev")
PROD = Resolver(TEMPLATE, Stage="prod")


def props(logical_id: str) -> dict:
    """The ``Properties`` of one resource, as the template writes them."""
    return RESOURCES[logical_id]["Properties"]
