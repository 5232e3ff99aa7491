"""Dry runs: steps that act on the world record the call they would make, and do not act.

A run is dry when its state document says so (``run.dry_run``); the flag travels in the
document, so it survives waits, approvals, retries and restarts, and a ``sub_workflow``
child inherits it (the compiled step copies it into the child's input).

In a dry run the acting steps (``tool``, ``webhook_out``, ``custom``, ``llm_batch``) build
their request exactly as they would, then return instead of sending it:

* the step's output is its ``dry_run_output`` template rendered against the document, or
  :data:`PLACEHOLDER` when it declares none;
* the Lambda's answer also carries ``dry_run: {"simulated": true, "call": …}``, the would-be
  call: ``{"kind": "aws", "tool", "action", "args"}``, ``{"kind": "http", "method",
  "url", "headers", "body"}`` or ``{"kind": "llm_batch", "provider", "model", "items"}``,
  with every credential header's value replaced by :data:`REDACTED`. The compiled
  ``ResultSelector`` keeps only ``output``, so the record never enters the state
  document; the run timeline reads it from the execution history.

A ``tool`` step with ``dry_run: read`` runs for real (the author vouches that it only reads).
Nothing of this touches flow control, circuit breakers or the step-result records.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relayflow.document import StepTask
from relayflow.steps.task import result

#: A simulated step's output when it declares no ``dry_run_output``.
PLACEHOLDER: dict[str, Any] = {"dry_run": True, "simulated": True}
#: What a credential or signature header's value is recorded as.
REDACTED = "[redacted]"
#: Header names whose values are credentials, whatever the step declared.
CREDENTIAL_HEADER_NAMES = frozenset(
    {"authorization", "proxy-authorization", "cookie", "x-api-key", "x-relayflow-signature"}
)
#: The AWS tools that only read: the ones ``dry_run: read`` may let run in a dry run.
READ_ONLY_AWS_TOOLS = frozenset(
    {"aws.dynamodb.get_item", "aws.dynamodb.query", "aws.s3.get_object"}
)


def is_dry_run(doc: Mapping[str, Any] | None) -> bool:
    """Whether the state document belongs to a dry run (``run.dry_run`` is true)."""
    run = doc.get("run") if isinstance(doc, Mapping) else None
    return isinstance(run, Mapping) and run.get("dry_run") is True


def event_is_dry_run(event: Any) -> bool:
    """Whether a step Task payload belongs to a dry run (a malformed one does not)."""
    return isinstance(event, Mapping) and is_dry_run(event.get("doc"))


def redacted_headers(
    headers: Mapping[str, Any], secret_names: frozenset[str] = frozenset()
) -> dict[str, str]:
    """``headers`` with the values of credential headers (and ``secret_names``, any case)
    replaced by :data:`REDACTED`."""
    hidden = CREDENTIAL_HEADER_NAMES | {name.lower() for name in secret_names}
    return {
        str(name): (REDACTED if str(name).lower() in hidden else str(value))
        for name, value in headers.items()
    }


def http_call(
    method: str,
    url: str,
    headers: Mapping[str, Any],
    body: Any,
    *,
    secret_names: frozenset[str] = frozenset(),
    query: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The would-be HTTP call: method, URL, headers without secrets, body (as rendered)."""
    call: dict[str, Any] = {
        "kind": "http",
        "method": method,
        "url": url,
        "headers": redacted_headers(headers, secret_names),
        "body": body,
    }
    if query:
        call["query"] = dict(query)
    return call


def aws_call(tool: str, action: str | None, args: Any) -> dict[str, Any]:
    """The would-be AWS call: the tool, its IAM action (``dynamodb:PutItem``) and args."""
    return {"kind": "aws", "tool": tool, "action": action, "args": args}


def simulated(task: StepTask, call: Mapping[str, Any]) -> dict[str, Any]:
    """The step's answer in a dry run: ``dry_run_output`` (rendered) or :data:`PLACEHOLDER`
    as the output, on the default route, with the would-be ``call`` recorded beside it."""
    from relayflow.expressions import render

    template = task.step.config.get("dry_run_output")
    output = dict(PLACEHOLDER) if template is None else render(template, task.doc)
    answer = result(output, task=task)
    answer["dry_run"] = {"simulated": True, "call": dict(call)}
    return answer
