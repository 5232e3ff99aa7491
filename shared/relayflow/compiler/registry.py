"""Step type → the step kind that compiles it (:mod:`relayflow.compiler.kinds`).

A new step kind is one module in ``kinds/`` (an ``emit(ctx, key, step)`` written against
:class:`relayflow.compiler.emitter.Emitter`) and one line here. The driver's scopes look
kinds up here; nothing this module imports reaches back to the driver."""

from __future__ import annotations

from relayflow.compiler.emitter import KindEmitter
from relayflow.compiler.kinds.agent import emit_agent
from relayflow.compiler.kinds.approval import emit_approval
from relayflow.compiler.kinds.condition import emit_condition
from relayflow.compiler.kinds.custom import emit_custom
from relayflow.compiler.kinds.delay import emit_delay
from relayflow.compiler.kinds.for_each import emit_for_each
from relayflow.compiler.kinds.llm_batch import emit_llm_batch
from relayflow.compiler.kinds.noop import emit_noop
from relayflow.compiler.kinds.parallel import emit_parallel
from relayflow.compiler.kinds.sub_workflow import emit_sub_workflow
from relayflow.compiler.kinds.task import emit_task
from relayflow.compiler.kinds.transform import emit_transform
from relayflow.compiler.kinds.wait_for_event import emit_wait_for_event
from relayflow.compiler.kinds.waitpoint import emit_waitpoint

#: Step type → the function that compiles it (every step type of the format).
EMITTERS: dict[str, KindEmitter] = {
    "agent": emit_agent,
    "approval": emit_approval,
    "code": emit_task,
    "condition": emit_condition,
    "custom": emit_custom,
    "delay": emit_delay,
    "for_each": emit_for_each,
    "llm_batch": emit_llm_batch,
    "noop": emit_noop,
    "parallel": emit_parallel,
    "sub_workflow": emit_sub_workflow,
    "tool": emit_task,
    "transform": emit_transform,
    "wait_for_event": emit_wait_for_event,
    "waitpoint": emit_waitpoint,
    "webhook_out": emit_task,
}
