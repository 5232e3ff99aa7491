"""Run starts checked against the workflow's declared ``input_schema``
(:mod:`relayflow.definition.input_schema`), and the schemas a parent's agents offer for the
workflows they run as tools, resolved when the parent is published.

Every start goes through :func:`relayflow.control.run_start.start_run`, which calls
:func:`check_run_input` before admission: an input that breaks the schema of the version being
started raises :class:`InvalidInput` (422 ``invalid_input``) and nothing is queued, recorded or
started. (A debounced or batched run's own deferred start is not checked again: each trigger
it holds was checked when it arrived, and a batch's input is their list.) What each trigger makes of
that refusal (docs/api.md#invalid-input):

* API: the 422 answer, ``details`` listing ``{pointer, rule, message}``;
* webhook: the same 422 answer to the sender (the delivery was not accepted, so the sender
  knows and its retries are not swallowed);
* event and schedule: nobody waits for an answer, so the refusal is kept as a run that ended
  ``failed`` with ``Relayflow.InvalidInput`` before any execution started
  (:func:`record_refused_run`): it lists with the workflow's runs, with its trigger payload
  and every violation in its cause; the delivery's result is ``invalid_input``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from relayflow.control.errors import ApiError
from relayflow.definition.input_schema import describe, input_violations

if TYPE_CHECKING:
    from relayflow.compiler import CompileOptions
    from relayflow.control.ports import HasDal
    from relayflow.dal import Dal
    from relayflow.dal.items import WorkflowItem


class InvalidInput(ApiError):
    """A run's input breaks the workflow's ``input_schema``; ``details`` lists each violation
    as ``{"pointer", "rule", "message"}`` (an RFC 6901 pointer into the input)."""

    status, code = 422, "invalid_input"


def declared_input_schema(dal: Dal, tenant: str, workflow_id: str, version: int) -> Any:
    """The ``input_schema`` of a stored version, or ``None`` (none declared, or no version)."""
    item = dal.get_version(tenant, workflow_id, version)
    if item is None:
        return None
    schema = json.loads(item.definition).get("input_schema")
    return schema if isinstance(schema, dict) else None


def check_run_input(dal: Dal, head: WorkflowItem, version: int | None, run_input: Any) -> None:
    """Raise :class:`InvalidInput` when ``run_input`` breaks the ``input_schema`` of the
    version a start runs (``version``, or the live one)."""
    number = head.live_version if version is None else version
    schema = declared_input_schema(dal, head.tenant, head.workflow_id, number)
    violations = input_violations(schema, run_input)
    if violations:
        raise InvalidInput(
            f"the input does not match workflow {head.workflow_id!r}'s input_schema: "
            f"{describe(violations)}",
            [v.to_dict() for v in violations],
        )


def with_child_schemas(
    options: CompileOptions, dal: Dal, tenant: str, workflow: Any
) -> CompileOptions:
    """``options`` with the ``input_schema`` of each workflow ``workflow``'s agents run as
    tools and its sub_workflow steps start, read from the tenant's live versions (or a
    step's pinned one). A child whose schema changes later is seen when the parent is
    published again."""
    from relayflow.validation.children import child_input_schemas, sub_workflow_input_schemas

    def definition(workflow_id: str, version: int | None = None) -> dict[str, Any] | None:
        if version is None:
            head = dal.get_workflow(tenant, workflow_id)
            if head is None:
                return None
            version = head.live_version
        item = dal.get_version(tenant, workflow_id, version)
        return json.loads(item.definition) if item is not None else None

    return dataclasses.replace(
        options,
        workflow_input_schemas=child_input_schemas(workflow, definition),
        sub_workflow_input_schemas=sub_workflow_input_schemas(workflow, definition),
    )


def record_refused_run(
    control: HasDal,
    tenant: str,
    workflow_id: str,
    run_input: Any,
    idempotency_key: str,
    trigger_type: str,
    refusal: InvalidInput,
) -> str:
    """Keep an event's or a schedule's refused start as a run that ended ``failed`` with
    ``Relayflow.InvalidInput`` before any execution started: it lists with the workflow's
    runs, holds the trigger payload and names each violation in its cause, so no delivery is
    lost silently. Keyed by ``idempotency_key``: a redelivery records it once. Returns the
    run id."""
    from relayflow.control.limits import RUN_RETENTION, idempotent_run_id
    from relayflow.control.records import RunMode
    from relayflow.control.run_records import new_run
    from relayflow.control.times import epoch, now_iso, parse_iso
    from relayflow.errors import InvalidRunInput

    head = control.dal.get_workflow(tenant, workflow_id)
    run_id = idempotent_run_id(tenant, workflow_id, idempotency_key)
    mode = RunMode(engine_version=None, dry_run=False, step_through=False)
    run, _ = new_run(
        head,
        run_id,
        run_input,
        head.live_version,
        idempotency_key,
        trigger_type,
        "failed",
        None,
        mode,
    )
    ended_at = now_iso()
    run = run.model_copy(
        update={
            "ended_at": ended_at,
            "error": InvalidRunInput.error_name,
            "cause": json.dumps({"message": refusal.message, "violations": refusal.details}),
            "expires_at": epoch(parse_iso(ended_at) + RUN_RETENTION),
        }
    )
    control.dal.create_run(run)  # False: a redelivery, recorded the first time
    return run_id
