"""The web console ``relayflow serve`` serves at ``/console`` (docs/console.md): workflows and
their graphs, runs with the timeline drawn on the graph, and the actions a run allows
(approve, resume, continue, cancel, retry from the DLQ, rerun from a step), all through the
public control API with the signed-in API key. Server-rendered HTML; the one script is the
vendored htmx (``static/``), so it works offline."""

from relayflow.console.app import Console, ConsoleResponse

__all__ = ["Console", "ConsoleResponse"]
