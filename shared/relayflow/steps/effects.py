"""The effects port: the one way an acting step reaches the world.

A step builds what it would do (the rendered tool args, the encoded request, the batch's
requests) and hands it to its :class:`Effects`; the implementation decides whether that
acts. Two exist: :class:`RealEffects` (here: calls the tool, sends the request, submits the
batch, notifies) and :class:`relayflow.steps.dry_run.DryRunEffects` (records the would-be
call and acts on nothing). Which one a step gets is chosen once, where its Lambda reads the
event (:func:`relayflow.steps.boundary.effects_for`); no step or tool asks itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from relayflow.document import StepTask
from relayflow.steps.task import result

if TYPE_CHECKING:
    from relayflow.dal.waits import ApprovalItem
    from relayflow.steps.delivery import Delivery

# The implementations import what they act with when they act: a step function that acts on
# nothing (condition, transform) loads no tool or HTTP code through its boundary.

#: A step's answer built from what the world answered (the HTTP response of a delivery).
Answer = Callable[[Any], dict[str, Any]]


@dataclass(frozen=True)
class BatchJob:
    """What an llm_batch step would do: ``act()`` submits the batch (or, ``polling``, asks
    for its status) and is the step's answer; ``requests()`` builds the batch's requests
    without sending them."""

    provider: str
    model_id: str
    polling: bool
    requests: Callable[[], list[Any]]
    act: Callable[[], dict[str, Any]]


class Effects(Protocol):
    """What acting steps do to the world. Methods named ``*_step`` and :meth:`deliver`
    return the step Lambda's whole answer (:func:`relayflow.steps.task.result`)."""

    def tool_step(self, task: StepTask, tool: str, args: Any) -> dict[str, Any]:
        """A tool step's answer: ``tool`` called with its rendered ``args`` (the step's
        ``http_tool``, ``breaker`` and ``dry_run`` config apply)."""
        ...

    def call_tool(
        self, tool: str, args: Any, doc: Mapping[str, Any], *, http_tool: Any, breaker: Any
    ) -> Any:
        """One tool call's result as an agent's tool call sees it."""
        ...

    def deliver(
        self, task: StepTask, delivery: Delivery, *, timeout: float, answer: Answer
    ) -> dict[str, Any]:
        """A webhook_out or custom step's answer: ``answer(response)`` for the sent
        ``delivery``."""
        ...

    def llm_batch_step(self, task: StepTask, job: BatchJob) -> dict[str, Any]:
        """An llm_batch step's answer: the ``job`` submitted or polled."""
        ...

    def notify_approval(self, item: ApprovalItem, channels: list[dict[str, Any]]) -> None:
        """Tell an approval request's notification channels that it waits."""
        ...


class RealEffects:
    """The effects of a real run: everything acts."""

    def tool_step(self, task: StepTask, tool: str, args: Any) -> dict[str, Any]:
        config = task.step.config
        output = self.call_tool(
            tool, args, task.doc, http_tool=config.get("http_tool"), breaker=config.get("breaker")
        )
        return result(output, task=task)

    def call_tool(
        self, tool: str, args: Any, doc: Mapping[str, Any], *, http_tool: Any, breaker: Any
    ) -> Any:
        """The catalogue dispatch (SSRF-guarded for HTTP tools), through the tenant's
        ``tool:<tool>`` breaker when ``breaker`` settings are given."""
        from relayflow.tools.catalogue import run_tool

        def call() -> Any:
            return run_tool(tool, args, doc=doc, http_tool=http_tool)

        if breaker:
            # Only then: a step without a breaker loads no breaker code and reads no table.
            from relayflow.reliability.breakers import guard_tool_call

            return guard_tool_call(doc, tool, breaker, call)
        return call()

    def deliver(
        self, task: StepTask, delivery: Delivery, *, timeout: float, answer: Answer
    ) -> dict[str, Any]:
        from relayflow.steps.delivery import send

        return answer(send(delivery, timeout=timeout))

    def llm_batch_step(self, task: StepTask, job: BatchJob) -> dict[str, Any]:
        return job.act()

    def notify_approval(self, item: ApprovalItem, channels: list[dict[str, Any]]) -> None:
        """Each entry of ``notification_channels`` is a mapping like a workflow's
        ``notifications`` (``webhook: {url, secret?, headers?}`` and/or ``email: {to,
        from?}``). Channels never raise; a failed delivery is logged (the request is stored
        and can be decided either way)."""
        if not channels:
            return
        from relayflow.approvals.links import approval_guest_links
        from relayflow.notify import Notification, channels_from_config
        from relayflow.observability import logger

        links = approval_guest_links(item)
        text = "\n\n".join(t for t in (item.title, item.description, item.prompt) if t)
        if links:
            text += "\n\n" + "\n".join(f"{option}: {url}" for option, url in links.items())
        notification = Notification(
            event="relayflow.approval.requested",
            id=f"approval:{item.approval_id}",
            tenant=item.tenant,
            subject=item.title,
            text=text,
            data={
                "approval_id": item.approval_id,
                "workflow_id": item.workflow_id,
                "run_id": item.run_id,
                "step": item.step,
                "options": item.options,
                "expires_at": item.deadline,
                "assigned_to": item.assigned_to,
                "assigned_role": item.assigned_role,
                "guest_links": links,
            },
        )
        for config in channels:
            for channel in channels_from_config(config):
                delivery = channel.send(notification)
                if not delivery.ok:
                    logger.warning(
                        "approval notification not delivered",
                        extra={"channel": delivery.channel, "detail": delivery.detail},
                    )
