"""Dry runs: steps that act on the world record the call they would make, and do not act.

A run is dry when its state document says so (``run.dry_run``); the flag travels in the
document, so it survives waits, approvals, retries and restarts, and a ``sub_workflow``
child inherits it (the compiled step copies it into the child's input). Its step Lambdas
get :class:`DryRunEffects` instead of the real effects (:mod:`relayflow.steps.boundary`).

In a dry run the acting steps (``tool``, ``webhook_out``, ``custom``, ``llm_batch``) build
their request exactly as they would, then return instead of sending it:

* the step's output is its ``dry_run_output`` template rendered against the document, or
  :data:`PLACEHOLDER` when it declares none;
* the Lambda's answer also carries ``dry_run: {"simulated": true, "call": …}``, the would-be
  call: ``{"kind": "aws", "tool", "action", "args"}``, ``{"kind": "http", "method",
  "url", "headers", "body"}`` (:mod:`relayflow.tools.call_records`) or ``{"kind":
  "llm_batch", "provider", "model", "items"}``, with every credential header's value
  replaced by :data:`~relayflow.tools.call_records.REDACTED`. The compiled
  ``ResultSelector`` keeps only ``output``, so the record never enters the state
  document; the run timeline reads it from the execution history.

A ``tool`` step with ``dry_run: read`` runs for real (the author vouches that it only reads).
An approval still waits for its decision but notifies no one. Nothing of this touches flow
control, circuit breakers or the step-result records.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from relayflow.document import StepTask
from relayflow.steps.effects import Answer, BatchJob
from relayflow.steps.task import result

if TYPE_CHECKING:
    from relayflow.dal.waits import ApprovalItem
    from relayflow.steps.delivery import Delivery

#: A simulated step's output when it declares no ``dry_run_output``.
PLACEHOLDER: dict[str, Any] = {"dry_run": True, "simulated": True}


def simulated(task: StepTask, call: Mapping[str, Any]) -> dict[str, Any]:
    """The step's answer in a dry run: ``dry_run_output`` (rendered) or :data:`PLACEHOLDER`
    as the output, on the default route, with the would-be ``call`` recorded beside it."""
    from relayflow.expressions import render

    template = task.step.config.get("dry_run_output")
    output = dict(PLACEHOLDER) if template is None else render(template, task.doc)
    answer = result(output, task=task)
    answer["dry_run"] = {"simulated": True, "call": dict(call)}
    return answer


class DryRunEffects:
    """The effects of a dry run: the would-be calls are recorded, nothing acts (but a tool
    step with ``dry_run: read``)."""

    def tool_step(self, task: StepTask, tool: str, args: Any) -> dict[str, Any]:
        from relayflow.tools.catalogue import run_tool, would_call

        config = task.step.config
        http_tool = config.get("http_tool")
        if config.get("dry_run") == "read":
            # The author vouches that it only reads: it runs, outside any breaker.
            output = run_tool(tool, args, doc=task.doc, http_tool=http_tool)
            answer = result(output, task=task)
            answer["dry_run"] = {"simulated": False, "read": True}
            return answer
        return simulated(task, would_call(tool, args, doc=task.doc, http_tool=http_tool))

    def call_tool(
        self, tool: str, args: Any, doc: Mapping[str, Any], *, http_tool: Any, breaker: Any
    ) -> Any:
        """An agent's tool call: nothing acts; the model is told what would have."""
        from relayflow.tools.catalogue import would_call

        return {
            "dry_run": True,
            "simulated": True,
            "call": would_call(tool, args, doc=doc, http_tool=http_tool),
        }

    def deliver(
        self, task: StepTask, delivery: Delivery, *, timeout: float, answer: Answer
    ) -> dict[str, Any]:
        """Simulated on the default route: no receiver answered with a branch."""
        from relayflow.steps.delivery import would_deliver

        return simulated(task, would_deliver(delivery))

    def llm_batch_step(self, task: StepTask, job: BatchJob) -> dict[str, Any]:
        """A dry run submits nothing (a batch is billed): the requests are rendered and built
        exactly as for a submission (the same named errors), and the would-be submission is
        recorded. The output has no ``state``, so the compiled check goes straight on; a
        poll reached anyway (a ``dry_run_output`` that says ``in_progress``) ends the loop."""
        from relayflow.ai.batch import item_bodies

        if job.polling:
            return result({**PLACEHOLDER, "state": "ended"}, task=task)
        built = job.requests()
        bodies = item_bodies(job.provider, job.model_id, built)
        call = {
            "kind": "llm_batch",
            "provider": job.provider,
            "model": job.model_id,
            "items": [
                {"custom_id": r.custom_id, "request": body}
                for r, body in zip(built, bodies, strict=True)
            ],
        }
        return simulated(task, call)

    def notify_approval(self, item: ApprovalItem, channels: list[dict[str, Any]]) -> None:
        """A dry run still waits for a decision (through the API), but tells no one."""
