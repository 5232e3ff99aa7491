"""Warnings about a valid definition: settings that run, but not as their author may think.

Unlike a problem (:mod:`relayflow.validation.validate`), a warning does not refuse the
definition; ``relayflow validate`` prints it (``--strict`` refuses it) and the control API
returns it with the saved workflow.
"""

from __future__ import annotations

from typing import Any

from relayflow.definition.problems import Problem
from relayflow.tools.http import BODYLESS_METHODS


def definition_warnings(workflow: Any) -> list[Problem]:
    """Every warning of a parsed workflow, in step order."""
    found: list[Problem] = []
    for key, step in workflow.steps.items():
        if getattr(step, "type", None) != "webhook_out":
            continue
        method = str(step.method).upper()
        if method in BODYLESS_METHODS and step.body is not None:
            found.append(
                Problem(
                    None,
                    f"steps.{key}.body",
                    "body-ignored",
                    f"a {method} request carries no body: this body is never sent (use POST, "
                    "PUT or PATCH to send it, or pass the data in the url's query)",
                )
            )
    return found
