"""Graph helpers for tests that check a graph has no cycle: the import graph of ``relayflow``
and the dependency graph of the translated template.

On pytest's ``pythonpath`` (pyproject.toml), so any test imports it by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def strongly_connected(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of the graph ``edges`` (node → the nodes it points
    to), each sorted, in the order Tarjan's algorithm closes them: the step graph's own
    :func:`relayflow.definition.graph.strong_components` (iterative, so a deep graph does not
    reach the recursion limit), over the nodes and their targets in sorted order."""
    from relayflow.definition.graph import strong_components

    nodes = sorted(set(edges) | {target for targets in edges.values() for target in targets})
    successors = {node: sorted(set(edges.get(node, ()))) for node in nodes}
    return [sorted(component) for component in strong_components(nodes, successors)]
