"""Worst-case size of the live state document, estimated from the definition.

Step Functions fails a run (``States.DataLimitExceeded``) whose document passes 256 KB. Step
Lambdas offload a large output to S3 (:mod:`relayflow.payloads`), so an output returned by a
Lambda never pushes the document past the offload threshold: it counts as a reference here.
What cannot be offloaded is what native states build: a native ``transform`` copies the values
it names, a ``for_each`` collects one record per item, a ``noop`` adds a small record. The
estimate adds, after each step, the worst size of every output still live there (see
:mod:`relayflow.compiler.liveness`) and reports the step where it is largest when that can
pass 256 KB.

Worst sizes per output (compact JSON):

* a Lambda step (tool, code, webhook_out, custom, a transform or condition in its Lambda):
  a reference, :data:`REFERENCE_BYTES`; its *value*, when a native step copies it, up to the
  offload threshold;
* approval and waitpoint: a reference's worth (the API caps their data at 256 KB; it is not
  estimated);
* sub_workflow: the child's final steps, up to the offload threshold (when the child's
  definition is at hand, e.g. ``relayflow validate`` with the child's file beside the parent,
  its own worst document instead, if smaller);
* a native transform: its literal text plus the worst value of each whole output it copies
  and :data:`FIELD_BYTES` for each field of an output it copies (the trigger, run and item
  are not counted: their size is the caller's);
* for_each: ``max_items`` times its item step's worst record;
* noop: a record;
* the saga's list (``$.saga``): one node per compensated main-flow step, with its record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from relayflow.compiler.plan import WorkflowPlan
from relayflow.definition.problems import Problem
from relayflow.expressions import expression_paths, template_expressions
from relayflow.settings import Settings

if TYPE_CHECKING:
    from relayflow.compiler.liveness import LivenessPlan
    from relayflow.definition.models import Workflow

#: Step Functions' limit on a state's input or output.
DOCUMENT_LIMIT_BYTES = 262_144
#: The size of an offloaded output's reference in the document, with its record.
REFERENCE_BYTES = 600
#: ``run``, ``counters``, an ``error`` being handled: what the document holds besides outputs.
BASE_BYTES = 1_024
#: A step record's own keys (``{"output": …, "status": "succeeded"}``) and its key.
RECORD_BYTES = 48
#: A node of the saga's list besides the output it carries (key, prev, nesting).
SAGA_NODE_BYTES = 96
#: What a copied field of an output (``steps.fetch.output.total``) is assumed to hold.
FIELD_BYTES = 4_096
OFFLOAD_THRESHOLD_BYTES: int = Settings.model_fields["offload_threshold_bytes"].default
_OFFLOADED_TYPES = frozenset(
    {"tool", "code", "webhook_out", "custom", "approval", "waitpoint", "agent", "llm_batch"}
)


@dataclass(frozen=True)
class SizeEstimate:
    """The worst live document after ``step``, and the outputs that make it up."""

    step: str
    bytes: int
    contributors: tuple[tuple[str, int], ...]

    def message(self) -> str:
        biggest = ", ".join(f"{key} ({size / 1024:,.0f} KB)" for key, size in self.contributors[:3])
        return (
            f"after '{self.step}' the state document can reach {self.bytes / 1024:,.0f} KB, over "
            f"Step Functions' 256 KB limit (the run would fail States.DataLimitExceeded); "
            f"largest live outputs: {biggest}. Outputs built natively (transform, for_each) are "
            "not offloaded to S3: copy less, lower max_items, or build the value in a Lambda step"
        )


class _Sizer:
    def __init__(
        self, workflow: Workflow, native: set[str], children: Mapping[str, int] | None = None
    ) -> None:
        self.wf = workflow
        self.native = native
        #: Worst output bytes of child workflows whose definitions are at hand, by id.
        self.children = dict(children or {})
        self.worst: dict[str, int] = {}
        self.copy: dict[str, int] = {}

    def record(self, key: str) -> int:
        """Worst bytes of ``$.steps.<key>`` in the document."""
        if key not in self.worst:
            self.worst[key] = OFFLOAD_THRESHOLD_BYTES  # a cycle of copies: assume the worst
            self.worst[key] = self._record(key)
        return self.worst[key]

    def value(self, key: str) -> int:
        """Worst bytes of the output's value, when a native step copies it."""
        step = self.wf.steps[key]
        if step.type in _OFFLOADED_TYPES or self._in_lambda(key):
            return OFFLOAD_THRESHOLD_BYTES
        if step.type == "sub_workflow":
            return self._child(step)
        return self.record(key)

    def _child(self, step: Any) -> int:
        """A child's output: its own worst document when known, else the offload threshold."""
        known = self.children.get(str(step.workflow_id))
        return OFFLOAD_THRESHOLD_BYTES if known is None else min(known, OFFLOAD_THRESHOLD_BYTES)

    def _in_lambda(self, key: str) -> bool:
        return self.wf.steps[key].type in ("transform", "condition") and key not in self.native

    def _record(self, key: str) -> int:
        step = self.wf.steps[key]
        overhead = RECORD_BYTES + len(key)
        if step.type in _OFFLOADED_TYPES or self._in_lambda(key):
            return REFERENCE_BYTES + len(key)
        if step.type == "sub_workflow":
            return self._child(step) + overhead
        if step.type == "transform":
            return overhead + self._template(step.mapping)
        if step.type == "for_each" and step.distributed:
            return overhead + FIELD_BYTES  # where the results went, not the results
        if step.type == "for_each":
            # Each item's record; an item step in a Lambda offloads its own large output.
            return overhead + step.max_items * self.record(step.step)
        if step.type in ("delay", "parallel") or key in self.native:
            return 0
        return overhead

    def _template(self, value: Any) -> int:
        size = len(json.dumps(value, separators=(",", ":"), default=str).encode())
        for src in template_expressions(value):
            for path in expression_paths(src):
                if len(path) >= 2 and path[0] == "steps" and path[1] in self.wf.steps:
                    whole = len(path) <= 3  # steps.<key> or steps.<key>.output
                    value = self.value(path[1])
                    size += value if whole else min(value, FIELD_BYTES)
                elif path == ("steps",):
                    size += DOCUMENT_LIMIT_BYTES
        return size


def _saga_bytes(workflow: Workflow, sizer: _Sizer) -> int:
    """Worst bytes of the saga's list of completed compensated steps (``$.saga``,
    :mod:`relayflow.compiler.compensation`): every node, with the output it may carry.
    Counted whole after every step: the list only grows."""
    items = {s.step for s in workflow.steps.values() if s.type == "for_each"}
    total = 0
    for key, step in workflow.steps.items():
        item = workflow.steps[step.step] if step.type == "for_each" else None
        compensated = getattr(item if item is not None else step, "compensate", None)
        if compensated is not None and key not in items:
            total += SAGA_NODE_BYTES + sizer.record(key)
    return total


def estimate_document(
    workflow: Workflow,
    plan: LivenessPlan,
    native: set[str],
    children: Mapping[str, int] | None = None,
) -> SizeEstimate | None:
    """The largest worst-case live document after any step (``None`` for no steps);
    ``children``: the worst output bytes of child workflows known by id."""
    sizer = _Sizer(workflow, native, children)
    worst: SizeEstimate | None = None
    saga = _saga_bytes(workflow, sizer)
    for key in plan.live_out:
        present = set(plan.live_out[key]) | {key}
        sizes = sorted(
            [
                *((k, sizer.record(k)) for k in present if sizer.record(k)),
                *((("saga", saga),) if saga else ()),
            ],
            key=lambda pair: (-pair[1], pair[0]),
        )
        total = BASE_BYTES + sum(size for _, size in sizes)
        if worst is None or total > worst.bytes:
            worst = SizeEstimate(key, total, tuple(sizes))
    return worst


def document_size_problems(
    workflow: Workflow, children: Mapping[str, Workflow] | None = None
) -> list[Problem]:
    """A ``document-size`` warning when the live document can pass 256 KB. ``children``
    (child workflows by id, e.g. the files beside the parent) size its sub_workflow steps'
    outputs by the child's own worst document instead of the offload threshold."""
    estimate = _estimate(workflow, _child_sizes(children or {}))
    if estimate is None or estimate.bytes <= DOCUMENT_LIMIT_BYTES:
        return []
    return [Problem(None, f"steps.{estimate.step}", "document-size", estimate.message())]


def _estimate(workflow: Workflow, children: Mapping[str, int]) -> SizeEstimate | None:
    plan = WorkflowPlan(workflow)
    return estimate_document(workflow, plan.liveness, plan.native_steps(), children)


def _child_sizes(children: Mapping[str, Workflow]) -> dict[str, int]:
    """Each known child's worst document (its grandchildren at the offload threshold)."""
    sizes: dict[str, int] = {}
    for workflow_id, child in children.items():
        estimate = _estimate(child, {})
        sizes[workflow_id] = estimate.bytes if estimate is not None else BASE_BYTES
    return sizes
