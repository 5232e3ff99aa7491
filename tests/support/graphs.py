"""Graph helpers for tests that check a graph has no cycle: the import graph of ``relayflow``
and the dependency graph of the translated template.

On pytest's ``pythonpath`` (pyproject.toml), so any test imports it by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping


def strongly_connected(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of the graph ``edges`` (node → the nodes it points
    to), each sorted, in the order Tarjan's algorithm closes them (iterative, so a deep graph
    does not reach the recursion limit). Nodes and their targets are visited in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []

    def enter(node: str) -> tuple[str, Iterator[str]]:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        return node, iter(sorted(edges.get(node, ())))

    for start in sorted(edges):
        if start in index:
            continue
        work = [enter(start)]
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    work.append(enter(child))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(sorted(component))
    return found
