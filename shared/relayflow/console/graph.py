"""The workflow graph as server-side SVG, with a run's timeline drawn on it.

The structure is the one ``relayflow graph`` draws (:class:`relayflow.definition.graph.StepGraph`:
routes, error routes, parallel branches and for_each item steps), plus what the compiled
machine adds around a step: its compensation (``compensate:``, a step or an inline call, drawn
as a dashed edge to what undoes it) and its park route (``on_error: {action: park}``, a badge:
the run waits there for a resume). The layout is layered top-down (longest path from the
start, back edges drawn as arcs on the right), computed here so the page needs no script.

Colours come from CSS classes (``s-<status>``) so the run page can restyle a step as the run
moves without redrawing the layout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from html import escape
from typing import Any

from relayflow.definition.graph import StepGraph

NODE_W, NODE_H = 176, 50
H_GAP, V_GAP = 28, 62
MARGIN = 24
START = "_start"


@dataclass
class StepState:
    """What the run page knows of one step: its status and the figures shown on the node."""

    status: str
    attempts: int = 0
    duration_ms: float | None = None
    items: int = 0


@dataclass
class _Edge:
    source: str
    target: str
    kind: str  # route, failure, contains, compensate
    label: str = ""


@dataclass
class Layout:
    positions: dict[str, tuple[float, float]] = field(default_factory=dict)
    width: float = 0.0
    height: float = 0.0


def _edges(definition: Mapping[str, Any]) -> tuple[list[str], list[_Edge], dict[str, str]]:
    """Nodes (the start first), edges, and each inline compensation's label."""
    steps: Mapping[str, Any] = definition.get("steps") or {}
    start = str(definition.get("start") or "")
    on_failure = (definition.get("errors") or {}).get("on_failure")
    graph = StepGraph(steps, start, on_failure)
    nodes = [START, *steps]
    edges = [_Edge(START, start, "route")] if start in steps else []
    inline: dict[str, str] = {}
    for key in steps:
        for edge in graph.edges.get(key, []):
            if edge.target not in steps:
                continue
            if edge.kind == "on_success":
                edges.append(_Edge(key, edge.target, "route"))
            elif edge.kind == "on_failure":
                edges.append(_Edge(key, edge.target, "failure", "on_failure"))
            elif edge.is_containment:
                label = "each item" if edge.kind == "step" else "branch"
                edges.append(_Edge(key, edge.target, "contains", label))
            else:
                name = edge.kind.removeprefix("on_").removeprefix("branch:")
                edges.append(_Edge(key, edge.target, "route", name))
        compensate = steps[key].get("compensate") if isinstance(steps[key], Mapping) else None
        if isinstance(compensate, str) and compensate in steps:
            edges.append(_Edge(key, compensate, "compensate", "compensate"))
        elif isinstance(compensate, Mapping):
            name = f"{key}.compensate"
            nodes.append(name)
            inline[name] = str(compensate.get("type") or "call")
            edges.append(_Edge(key, name, "compensate", "compensate"))
    return nodes, edges, inline


def structure(definition: Mapping[str, Any]) -> dict[str, Any]:
    """The graph as data (``relayflow graph --json``): nodes with their type, park route and
    compensation, and edges with their kind (route, failure, contains, compensate)."""
    steps: Mapping[str, Any] = definition.get("steps") or {}
    nodes, edges, inline = _edges(definition)
    listed = []
    for node in nodes[1:]:
        raw = steps.get(node) if isinstance(steps.get(node), Mapping) else {}
        on_error = raw.get("on_error") if isinstance(raw.get("on_error"), Mapping) else {}
        listed.append(
            {
                "key": node,
                "type": inline.get(node) or raw.get("type"),
                "compensation_of": node.removesuffix(".compensate") if node in inline else None,
                "parks": on_error.get("action") == "park",
            }
        )
    return {
        "start": definition.get("start"),
        "nodes": listed,
        "edges": [
            {"from": e.source, "to": e.target, "kind": e.kind, "label": e.label or None}
            for e in edges
            if e.source != START
        ],
    }


def layout(nodes: list[str], edges: list[_Edge]) -> tuple[Layout, set[tuple[str, str]]]:
    """Layered positions (top-down) and the back edges (drawn as arcs)."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for edge in edges:
        if edge.kind != "compensate":
            succ[edge.source].append(edge.target)
    # Back edges: an edge to a node on the DFS stack (iterative, so long chains are fine).
    back: set[tuple[str, str]] = set()
    state: dict[str, int] = {}
    for root in nodes:
        if root in state:
            continue
        stack = [(root, iter(succ[root]))]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
            elif state.get(child) == 1:
                back.add((node, child))
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(succ[child])))
    layer: dict[str, int] = {START: 0}
    indegree = {n: 0 for n in nodes}
    forward = [(e.source, e.target) for e in edges if e.kind != "compensate"]
    forward = [(s, t) for s, t in forward if (s, t) not in back]
    for _, target in forward:
        indegree[target] += 1
    ready = [n for n in nodes if indegree[n] == 0]
    while ready:
        node = ready.pop(0)
        for source, target in forward:
            if source != node:
                continue
            layer[target] = max(layer.get(target, 0), layer.get(node, 0) + 1)
            indegree[target] -= 1
            if indegree[target] == 0:
                ready.append(target)
    for edge in edges:  # compensations (and steps only they reach) sit beside their step
        if edge.kind == "compensate" and edge.target not in layer and edge.source in layer:
            layer[edge.target] = layer[edge.source]
    deepest = max(layer.values(), default=0)
    for node in nodes:
        layer.setdefault(node, deepest + 1)
    rows: dict[int, list[str]] = {}
    for node in nodes:
        rows.setdefault(layer[node], []).append(node)
    result = Layout()
    widest = max(len(row) for row in rows.values())
    result.width = MARGIN * 2 + widest * NODE_W + (widest - 1) * H_GAP + 60
    order: dict[str, float] = {}
    for depth in sorted(rows):
        row = rows[depth]
        # One barycentre pass: a step sits under the steps that lead to it.
        preds = {n: [order[s] for s, t in forward if t == n and s in order] for n in row}
        row.sort(key=lambda n: sum(preds[n]) / len(preds[n]) if preds[n] else 1e9)
        span = len(row) * NODE_W + (len(row) - 1) * H_GAP
        left = (result.width - 60 - span) / 2
        for index, node in enumerate(row):
            x = left + index * (NODE_W + H_GAP)
            result.positions[node] = (x, MARGIN + depth * (NODE_H + V_GAP))
            order[node] = x
    result.height = MARGIN * 2 + (max(rows) + 1) * NODE_H + max(rows) * V_GAP
    return result, back


def _fmt_ms(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.0f} ms" if value < 1000 else f"{value / 1000:.1f} s"


def render_svg(
    definition: Mapping[str, Any],
    states: Mapping[str, StepState] | None = None,
    *,
    link: str = "#step-",
) -> str:
    """The graph of ``definition`` as an ``<svg>`` element; with ``states`` (a run's timeline
    by step key) each node carries its status class, attempts and duration."""
    steps: Mapping[str, Any] = definition.get("steps") or {}
    nodes, edges, inline = _edges(definition)
    placed, back = layout(nodes, edges)
    pos = placed.positions
    parts = [
        f'<svg class="graph" xmlns="http://www.w3.org/2000/svg" width="{placed.width:.0f}" '
        f'height="{placed.height:.0f}" viewBox="0 0 {placed.width:.0f} {placed.height:.0f}" '
        'role="img" aria-label="workflow graph">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" '
        'fill="context-stroke"/></marker></defs>',
    ]
    for edge in edges:
        sx, sy = pos[edge.source]
        tx, ty = pos[edge.target]
        if edge.kind == "compensate" and abs(sy - ty) < 1:
            x1, y1, x2, y2 = sx + NODE_W, sy + NODE_H / 2, tx, ty + NODE_H / 2
            if tx < sx:
                x1, x2 = sx, tx + NODE_W
            path = f"M{x1:.0f},{y1:.0f} L{x2:.0f},{y2:.0f}"
            mx, my = (x1 + x2) / 2, y1 - 6
            label = ""  # too short to label: the dotted purple edge and ↺ say it
        elif (edge.source, edge.target) in back or ty <= sy:
            x1, y1 = sx + NODE_W, sy + NODE_H / 2
            x2, y2 = tx + NODE_W, ty + NODE_H / 2
            bulge = max(x1, x2) + 40
            path = (
                f"M{x1:.0f},{y1:.0f} C{bulge:.0f},{y1:.0f} {bulge:.0f},{y2:.0f} {x2:.0f},{y2:.0f}"
            )
            mx, my = bulge - 8, (y1 + y2) / 2
            label = edge.label
        else:
            label = edge.label
            x1, y1 = sx + NODE_W / 2, sy + NODE_H
            x2, y2 = tx + NODE_W / 2, ty
            mid = (y1 + y2) / 2
            path = f"M{x1:.0f},{y1:.0f} C{x1:.0f},{mid:.0f} {x2:.0f},{mid:.0f} {x2:.0f},{y2:.0f}"
            mx, my = (x1 + x2) / 2, mid
        parts.append(
            f'<path class="edge e-{edge.kind}" d="{path}" marker-end="url(#arrow)" '
            f'data-from="{escape(edge.source)}" data-to="{escape(edge.target)}"/>'
        )
        if label:
            parts.append(
                f'<text class="edge-label e-{edge.kind}" x="{mx:.0f}" y="{my:.0f}">'
                f"{escape(label)}</text>"
            )
    for node in nodes:
        x, y = pos[node]
        if node == START:
            parts.append(
                f'<g class="node start"><rect x="{x + NODE_W / 2 - 30:.0f}" y="{y + 10:.0f}" '
                f'width="60" height="30" rx="15"/><text x="{x + NODE_W / 2:.0f}" '
                f'y="{y + 30:.0f}" text-anchor="middle">start</text></g>'
            )
            continue
        parts.append(_node(node, steps, inline, (states or {}), x, y, link))
    parts.append("</svg>")
    return "".join(parts)


def _node(
    node: str,
    steps: Mapping[str, Any],
    inline: Mapping[str, str],
    states: Mapping[str, StepState],
    x: float,
    y: float,
    link: str,
) -> str:
    raw = steps.get(node) if isinstance(steps.get(node), Mapping) else {}
    kind = inline.get(node) or str(raw.get("type") or "")
    title = node.removesuffix(".compensate") + " ↺" if node in inline else node
    state = states.get(node)
    status = state.status if state else ("pending" if states else "idle")
    classes = f"node s-{escape(status)}" + (" compensation" if node in inline else "")
    on_error = raw.get("on_error") if isinstance(raw.get("on_error"), Mapping) else {}
    badges = []
    if on_error.get("action") == "park":
        badges.append("park")
    if state and state.items:
        badges.append(f"{state.items} items")
    figures = []
    if state and state.attempts > 1:
        figures.append(f"×{state.attempts}")
    if state and state.duration_ms is not None:
        figures.append(_fmt_ms(state.duration_ms))
    detail = " · ".join([kind, *badges])
    figure = " · ".join(figures)
    return (
        f'<a href="{escape(link)}{escape(node)}"><g class="{classes}" data-step="{escape(node)}"'
        f' data-status="{escape(status)}"><title>{escape(node)}: {escape(status)}</title>'
        f'<rect x="{x:.0f}" y="{y:.0f}" width="{NODE_W}" height="{NODE_H}" rx="7"/>'
        f'<text class="title" x="{x + 10:.0f}" y="{y + 20:.0f}">'
        f"{escape(_clip(title, 14 if figure else 22))}</text>"
        f'<text class="detail" x="{x + NODE_W - 8:.0f}" y="{y + 20:.0f}" text-anchor="end">'
        f"{escape(figure)}</text>"
        f'<text class="detail" x="{x + 10:.0f}" y="{y + 38:.0f}">{escape(_clip(detail, 28))}'
        "</text></g></a>"
    )


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


#: Step types whose "running" is waiting for someone or something outside the run.
WAITING_TYPES = frozenset({"approval", "waitpoint", "wait_for_event"})


def shown_status(entry: Mapping[str, Any]) -> str:
    """A timeline entry's status as the console shows it: a waiting step that is still
    open (an approval, a waitpoint, a ``wait_for_event``) is ``waiting``, not ``running``."""
    status = str(entry.get("status") or "")
    if status == "running" and entry.get("type") in WAITING_TYPES:
        return "waiting"
    return status


def timeline_states(run: Mapping[str, Any]) -> dict[str, StepState]:
    """A run's timeline (``GET /runs/{id}``'s ``steps``) by step key: for_each items fold into
    their step (items counted; the step fails if any item did)."""
    states: dict[str, StepState] = {}
    for entry in run.get("steps") or []:
        key = str(entry.get("key") or "")
        base, _, item = key.partition("[")
        status = shown_status(entry)
        if item:
            found = states.setdefault(base, StepState("succeeded"))
            found.items += 1
            if status in ("failed", "running", "parked", "waiting"):
                found.status = status
            continue
        existing = states.get(base)
        states[base] = StepState(
            status=status,
            attempts=int(entry.get("attempts") or 0),
            duration_ms=entry.get("duration_ms"),
            items=existing.items if existing else 0,
        )
    return states
