"""Effective step settings: each step with the workflow's ``defaults`` applied.

The compiler compiles :func:`effective_workflow` of a definition, so what a step leaves out
is decided here, once: an acting step (tool, webhook_out, custom, code, agent) without a
``retry`` gets ``defaults.retry`` and without a ``timeout_seconds`` gets
``defaults.timeout_seconds`` (kept above the step's own HTTP or wall-clock limit, see
:func:`own_limit`), and so does an inline ``compensate:`` call, as the compensation step it
stands for would; ``retry: none`` (on the step or in the defaults) means one attempt; a
delay step without ``seconds`` or ``until`` waits ``defaults.delay_seconds``.
:func:`effective_rows` is the same decision as a table (``relayflow compile --effective``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from relayflow.definition.compensation import CompensationCall
from relayflow.definition.models import Workflow
from relayflow.definition.policies import ACTING_STEP_TYPES, RetryPolicy, StepDefaults
from relayflow.definition.step_models import compensation_call


def _retry(step: Any, defaults: StepDefaults) -> RetryPolicy | None:
    setting = step.retry
    if setting is None and step.type in ACTING_STEP_TYPES:
        setting = defaults.retry
    return setting if isinstance(setting, RetryPolicy) else None


#: A default timeout stays this far above a limit the step declares itself, so that limit
#: fires first and names the failure (an HTTP timeout is Relayflow.Transient, and retried;
#: the Task's States.Timeout is not).
OWN_LIMIT_MARGIN_SECONDS = 5


def own_limit(step: Any, workflow: Workflow) -> float | None:
    """The time limit an acting step declares for its own work: an HTTP request's timeout
    (webhook_out, custom, an ``http.<name>`` tool) or a code step's ``wall_seconds``."""
    if step.type in ("webhook_out", "custom"):
        return step.request_timeout_seconds  # type: ignore[no-any-return]
    if step.type == "code":
        return step.wall_seconds  # type: ignore[no-any-return]
    if step.type == "tool" and step.tool.startswith("http."):
        tool = workflow.http_tools.get(step.tool.split(".")[1])
        return tool.timeout_seconds if tool is not None else None
    return None


def _timeout(step: Any, workflow: Workflow) -> int | None:
    default = workflow.defaults.timeout_seconds
    if step.timeout_seconds is not None or step.type not in ACTING_STEP_TYPES:
        return step.timeout_seconds  # type: ignore[no-any-return]
    if not isinstance(default, int):
        return None
    limit = own_limit(step, workflow)
    if limit is None:
        return default
    return max(default, math.ceil(limit) + OWN_LIMIT_MARGIN_SECONDS)


def effective_step(step: Any, workflow: Workflow) -> Any:
    """``step`` (of ``workflow``) with its effective ``retry`` (a policy or ``None``),
    ``timeout_seconds`` and, for a delay, ``seconds``; ``step`` itself when nothing changes."""
    defaults = workflow.defaults
    update: dict[str, Any] = {}
    retry = _retry(step, defaults)
    if retry is not step.retry:
        update["retry"] = retry
    timeout = _timeout(step, workflow)
    if timeout != step.timeout_seconds:
        update["timeout_seconds"] = timeout
    if step.type == "delay" and step.seconds is None and step.until is None:
        update["seconds"] = defaults.delay_seconds
    inline = getattr(step, "compensate", None)
    if isinstance(inline, CompensationCall):
        resolved = _effective_call(inline, workflow)
        if resolved is not inline:
            update["compensate"] = resolved
    return step.model_copy(update=update) if update else step


def _effective_call(call: CompensationCall, workflow: Workflow) -> CompensationCall:
    """An inline compensation with the defaults a compensation step of its type would get
    (it is the same call written in place): ``retry`` a policy or ``None``, a timeout."""
    as_step = compensation_call(SimpleNamespace(compensate=call), {})
    effective = effective_step(as_step, workflow)
    if effective is as_step:
        return call
    fields = call.model_dump(mode="json", exclude_none=True)
    retry = effective.retry.model_dump(mode="json") if effective.retry else None
    fields.update(retry=retry, timeout_seconds=effective.timeout_seconds)
    return CompensationCall.model_validate(fields)


def effective_workflow(workflow: Workflow) -> Workflow:
    """``workflow`` with every step's effective settings (see the module docstring).
    Idempotent: the result's defaults are spent (``none``), so a second pass changes nothing
    (a step's resolved ``retry: none`` is ``None`` and must not take the default again)."""
    steps = {key: effective_step(step, workflow) for key, step in workflow.steps.items()}
    if all(steps[key] is step for key, step in workflow.steps.items()):
        return workflow
    spent = StepDefaults(
        retry="none", timeout_seconds="none", delay_seconds=workflow.defaults.delay_seconds
    )
    return workflow.model_copy(update={"steps": steps, "defaults": spent})


@dataclass(frozen=True)
class EffectiveRow:
    """One step's effective retry, timeout and wait, in words."""

    key: str
    type: str
    retry: str
    timeout: str
    wait: str
    #: Where each value came from: ``step`` (written on the step) or ``defaults``.
    source: str


def describe_retry(policy: RetryPolicy | None) -> str:
    """``3 × Relayflow.Transient, exponential 10 s ×2 ≤ 300 s, full jitter`` or ``none``."""
    if policy is None or policy.max_attempts <= 1:
        return "none"
    errors = ", ".join(policy.retry_on) if policy.retry_on else "retryable errors"
    growth = {"fixed": "fixed", "linear": "linear +", "exponential": "exponential"}
    text = f"{policy.max_attempts} attempts on {errors}, {growth[policy.backoff]} "
    text += f"{policy.base_seconds} s"
    if policy.backoff == "exponential":
        text += " ×2"
    if policy.max_delay_seconds is not None:
        text += f" ≤ {policy.max_delay_seconds} s"
    if policy.jitter:
        text += ", full jitter"
    return text


def effective_rows(workflow: Workflow) -> list[EffectiveRow]:
    """The effective retry / timeout / wait of each step that has one, in definition order."""
    rows: list[EffectiveRow] = []
    for key, step in workflow.steps.items():
        acting = step.type in ACTING_STEP_TYPES
        waits = step.type == "delay"
        if not acting and not waits and step.retry is None and step.timeout_seconds is None:
            continue
        effective = effective_step(step, workflow)
        from_defaults = []
        if acting and step.retry is None:
            from_defaults.append("retry")
        if acting and step.timeout_seconds is None:
            from_defaults.append("timeout")
        wait = ""
        if waits:
            if effective.until is not None:
                wait = f"until {effective.until}"
            else:
                wait = f"{effective.seconds} s" if isinstance(effective.seconds, int) else ""
                wait = wait or str(effective.seconds)
            if step.seconds is None and step.until is None:
                from_defaults.append("wait")
        timeout = effective.timeout_seconds
        rows.append(
            EffectiveRow(
                key=key,
                type=step.type,
                retry="" if waits else describe_retry(effective.retry),
                timeout="" if waits else (f"{timeout} s" if timeout else "none"),
                wait=wait,
                source=f"defaults: {', '.join(from_defaults)}" if from_defaults else "step",
            )
        )
    return rows
