"""A deterministic measure of graph work for the tests that assert a rule stays linear: the
number of times :meth:`StepGraph.routes` is asked for a step's routes (every graph rule walks
the graph through it). Counting calls, not seconds, keeps those tests true on a loaded machine.

On pytest's ``pythonpath`` (pyproject.toml), so any test imports it by name.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from relayflow.definition.graph import Edge, StepGraph


class RoutesAsked:
    """Counts ``StepGraph.routes`` calls from :meth:`install` until the test's monkeypatch
    is undone; :attr:`calls` is the count since the last :meth:`reset`."""

    def __init__(self) -> None:
        self.calls = 0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> RoutesAsked:
        routes = StepGraph.routes

        def counted(graph: StepGraph, key: str) -> Iterator[Edge]:
            self.calls += 1
            return routes(graph, key)

        monkeypatch.setattr(StepGraph, "routes", counted)
        return self

    def reset(self) -> None:
        self.calls = 0
