"""Idempotent side effects and step-result caching for the steps that act on the world
(tool, webhook_out, custom, code).

A step execution is identified by the tenant, the run id (``doc.run.id``), the step key, the
item position inside a ``for_each`` (``doc.index``) and the pass through a cycle
(``doc.counters.steps``). Not by the Step Functions execution, nor by the attempt: so

* a Lambda invoked twice for the same step execution acts once, and the second invocation
  returns the recorded result;
* a run restarted under the same run id (a new execution ``<run_id>_r2`` of the same input)
  replays the results of the steps that already succeeded, pass by pass and item by item,
  and acts only from the step that had not;
* a failure is never recorded: Powertools deletes the in-progress record when the step
  raises, so a retry or a restart acts again.

Records are Powertools idempotency records (``aws_lambda_powertools.utilities.idempotency``,
:class:`DynamoDBPersistenceLayer`) in the Relayflow table, under the partition
``TENANT#<tenant>#STEP#<run id>`` (:func:`relayflow.dal.keys.step_results_partition`) with
Powertools' idempotency key (``<step key>#<sha256 of the identity>``) as the sort key. They
expire (``expires_at``, the table's TTL) ``step_result_ttl_days`` after they were written.
An in-progress record expires with the invocation that wrote it (the Lambda context's
remaining time), so a Lambda that died does not block the step for a month.

A second invocation that finds the step still in progress elsewhere raises
``Relayflow.Transient``: it passes on its own once the other invocation ends (its result is
then replayed) or its time runs out (the step then acts). A table that cannot be reached is
``Relayflow.Transient`` too: acting without a record could act twice.

**Attempts that timed out.** Every record names its owner: the Step Functions execution
(``context.execution_id``), the attempt (``context.attempt``, ``$$.State.RetryCount``) and a
random token of the invocation. Step Functions starts attempt *n + 1* of a Task only once it
has given up on attempt *n* (it failed or timed out), so a later attempt of the same
execution, or any attempt of a later execution of the run (a DLQ restart), **takes over** a
record still in progress: the retry acts at once instead of failing as "already running".
A *completed* record written by an earlier attempt of the **same** execution is taken over
too: the step is only retried when Step Functions did not get that attempt's result, so the
retry acts again and its own result is the step's (a restart, a new execution, still
replays every completed step). Only a true duplicate (the same execution and attempt) waits
for the record as before. The records of *parts* of a step (an agent's turns and tool calls,
an ``llm_batch`` submission: ``run_recorded(…, part=True)``) are replayed by a later attempt
once completed: that attempt retries the step, not the part. When the abandoned call
finishes after all, its result is discarded: the record is written only while the
invocation still owns it (a conditional write on the token), so a late success is not
recorded and a late failure does not delete the record of the attempt that took over.
``docs/reliability.md`` describes what this means for side effects.

Dry runs are not recorded: their steps only record the call they would make
(:mod:`relayflow.steps.dry_run`) and never reach :func:`recorded_step`
(:mod:`relayflow.steps.boundary`), so a duplicate has nothing to repeat, and a dry run writes
nothing for its steps. A ``for_each``
cannot run another ``for_each`` or a ``parallel`` per item (``relayflow.validation.validate``),
so ``doc.index`` alone tells the iterations of a step apart: there are no nested loops.

Powertools and boto3 are imported on the first invocation, not when a handler is imported.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, replace
from typing import Any

from relayflow.errors import InvalidArgsError, TransientError
from relayflow.observability import Handler, logger

#: The part under which a step recorded in parts (an agent) records its final result: not
#: replayed as the step's result, but what an Express run's timeline shows as its output.
RESULT_PART = "result"
#: The record's attributes: ``pk``/``sk`` are the table's keys, ``expires_at`` its TTL.
KEY_ATTR = "pk"
SORT_KEY_ATTR = "sk"
EXPIRY_ATTR = "expires_at"
#: How long an in-progress record blocks duplicates when the invocation has no Lambda context
#: to tell its deadline (Lambda's longest timeout).
FALLBACK_DEADLINE_MS = 15 * 60 * 1000


@dataclass(frozen=True)
class StepIdentity:
    """What makes one step execution: the same identity means the same effect."""

    tenant: str
    run_id: str
    step_key: str
    index: int | None = None
    iteration: int | None = None

    @property
    def partition(self) -> str:
        from relayflow.dal.keys import step_results_partition

        try:
            return step_results_partition(self.tenant, self.run_id)
        except ValueError as exc:
            raise InvalidArgsError(f"cannot record the step's result: {exc}") from exc

    def wait_id(self, kind: str) -> str:
        """The id of the approval or waitpoint this step execution waits on: 32 hex digits
        of sha256 over the identity, so a restarted run (same run id) finds the request its
        earlier execution made, and a duplicate invocation finds its own."""
        import hashlib
        import json

        text = json.dumps({"kind": kind, **self.key_data()}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def part(self, suffix: str) -> StepIdentity:
        """The identity of one part of this step execution (``<step key>#<suffix>``)."""
        return replace(self, step_key=f"{self.step_key}#{suffix}")

    @property
    def record_key(self) -> str:
        """The sort key of this step execution's result record: Powertools' idempotency key,
        ``<step key>#<sha256 of the sorted JSON of key_data>``."""
        import hashlib
        import json

        text = json.dumps(self.key_data(), sort_keys=True)
        return f"{self.step_key}#{hashlib.sha256(text.encode()).hexdigest()}"

    def key_data(self) -> dict[str, Any]:
        """The value Powertools hashes into the idempotency key."""
        return {
            "tenant": self.tenant,
            "run": self.run_id,
            "step": self.step_key,
            "index": self.index,
            "iteration": self.iteration,
        }


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def step_identity(event: Any) -> StepIdentity | None:
    """The identity of the step execution a Task payload asks for; ``None`` for a payload
    without a run or a step key (the step's own parsing reports a malformed payload)."""
    if not isinstance(event, dict):
        return None
    step, doc = event.get("step"), event.get("doc")
    if not isinstance(step, dict) or not isinstance(doc, dict):
        return None
    run = doc.get("run")
    if not isinstance(run, dict):
        return None
    run_id, tenant, key = run.get("id"), run.get("tenant") or "local", step.get("key")
    if not (isinstance(run_id, str) and run_id and isinstance(key, str) and key):
        return None
    if not isinstance(tenant, str):
        return None
    counters = doc.get("counters")
    return StepIdentity(
        tenant=tenant,
        run_id=run_id,
        step_key=key,
        index=_int_or_none(doc.get("index")),
        iteration=_int_or_none(counters.get("steps")) if isinstance(counters, dict) else None,
    )


class _Deadline:
    """A stand-in Lambda context for invocations without one (tests, direct calls)."""

    def __init__(self, millis: int) -> None:
        self._millis = millis

    def get_remaining_time_in_millis(self) -> int:
        return self._millis


@dataclass(frozen=True)
class Owner:
    """Who holds a step's record: the execution, the attempt within it and the invocation.
    ``retakes_completed`` says whether a later attempt of the same execution takes over a
    record that is already ``COMPLETED`` (a whole step's result) or replays it (a part of a
    step: see :func:`run_recorded`)."""

    execution: str | None
    attempt: int
    token: str
    retakes_completed: bool = True

    @classmethod
    def of(cls, event: Any, *, retakes_completed: bool = True) -> Owner:
        import uuid

        context = event.get("context") if isinstance(event, dict) else None
        context = context if isinstance(context, dict) else {}
        execution = context.get("execution_id")
        return cls(
            execution=execution if isinstance(execution, str) and execution else None,
            attempt=_int_or_none(context.get("attempt")) or 0,
            token=uuid.uuid4().hex,
            retakes_completed=retakes_completed,
        )


#: Attributes of the owner on a record.
OWNER_EXECUTION_ATTR = "owner_execution"
OWNER_ATTEMPT_ATTR = "owner_attempt"
OWNER_TOKEN_ATTR = "owner_token"

_local = threading.local()


@functools.cache
def _layer_class() -> type:
    """Powertools' DynamoDB persistence layer with owned records (see the module docstring):
    the put may take over the record of an abandoned attempt, and the success update and the
    failure delete are conditional on still owning it."""
    from aws_lambda_powertools.utilities.idempotency.exceptions import (
        IdempotencyItemAlreadyExistsError,
    )
    from aws_lambda_powertools.utilities.idempotency.persistence.base import (
        STATUS_CONSTANTS,
        DataRecord,
    )
    from aws_lambda_powertools.utilities.idempotency.persistence.dynamodb import (
        DynamoDBPersistenceLayer,
    )
    from botocore.exceptions import ClientError

    def condition_failed(exc: ClientError) -> bool:
        return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"

    class OwnedPersistenceLayer(DynamoDBPersistenceLayer):  # type: ignore[misc]
        owner: Owner | None = None

        def _put_record(self, data_record: DataRecord) -> None:
            import datetime as dt

            owner = self.owner or Owner(None, 0, "")
            item: dict[str, Any] = {
                **self._get_key(data_record.idempotency_key),
                self.expiry_attr: {"N": str(data_record.expiry_timestamp)},
                self.status_attr: {"S": data_record.status},
                OWNER_ATTEMPT_ATTR: {"N": str(owner.attempt)},
                OWNER_TOKEN_ATTR: {"S": owner.token},
            }
            if owner.execution is not None:
                item[OWNER_EXECUTION_ATTR] = {"S": owner.execution}
            if data_record.in_progress_expiry_timestamp is not None:
                item[self.in_progress_expiry_attr] = {
                    "N": str(data_record.in_progress_expiry_timestamp)
                }
            now = dt.datetime.now()
            conditions = [
                "attribute_not_exists(#id)",
                "#expiry < :now",
                "(#status = :inprogress AND attribute_exists(#ipe) AND #ipe < :now_ms)",
            ]
            values: dict[str, Any] = {
                ":now": {"N": str(int(now.timestamp()))},
                ":now_ms": {"N": str(int(now.timestamp() * 1000))},
                ":inprogress": {"S": STATUS_CONSTANTS["INPROGRESS"]},
            }
            names = {
                "#id": self.key_attr,
                "#expiry": self.expiry_attr,
                "#ipe": self.in_progress_expiry_attr,
                "#status": self.status_attr,
            }
            if owner.execution is not None:
                # Step Functions gave up on every earlier attempt and every earlier execution.
                conditions.append("(#status = :inprogress AND #exec <> :exec)")
                conditions.append(
                    "(#exec = :exec AND #attempt < :attempt)"
                    if owner.retakes_completed
                    else "(#status = :inprogress AND #exec = :exec AND #attempt < :attempt)"
                )
                values[":exec"] = {"S": owner.execution}
                values[":attempt"] = {"N": str(owner.attempt)}
                names["#exec"] = OWNER_EXECUTION_ATTR
                names["#attempt"] = OWNER_ATTEMPT_ATTR
            try:
                self.client.put_item(
                    TableName=self.table_name,
                    Item=item,
                    ConditionExpression=" OR ".join(conditions),
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
                old = exc.response.get("Item")  # type: ignore[typeddict-item]
                if old is None:
                    raise IdempotencyItemAlreadyExistsError() from exc
                old_record = self._item_to_data_record(old)
                self._validate_payload(data_payload=data_record, stored_data_record=old_record)
                raise IdempotencyItemAlreadyExistsError(old_data_record=old_record) from exc

        def _owned(self) -> dict[str, Any]:
            token = self.owner.token if self.owner is not None else ""
            return {
                "ConditionExpression": "#owner_token = :owner_token",
                "names": {"#owner_token": OWNER_TOKEN_ATTR},
                "values": {":owner_token": {"S": token}},
            }

        def _update_record(self, data_record: DataRecord) -> None:
            owned = self._owned()
            try:
                self.client.update_item(
                    TableName=self.table_name,
                    Key=self._get_key(data_record.idempotency_key),
                    UpdateExpression=(
                        "SET #response_data = :response_data, #expiry = :expiry, #status = :status"
                    ),
                    ConditionExpression=owned["ConditionExpression"],
                    ExpressionAttributeNames={
                        "#response_data": self.data_attr,
                        "#expiry": self.expiry_attr,
                        "#status": self.status_attr,
                        **owned["names"],
                    },
                    ExpressionAttributeValues={
                        ":response_data": {"S": data_record.response_data},
                        ":expiry": {"N": str(data_record.expiry_timestamp)},
                        ":status": {"S": data_record.status},
                        **owned["values"],
                    },
                )
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
                logger.warning(
                    "result of an abandoned attempt not recorded: a later attempt owns the step"
                )

        def _delete_record(self, data_record: DataRecord) -> None:
            owned = self._owned()
            try:
                self.client.delete_item(
                    TableName=self.table_name,
                    Key=self._get_key(data_record.idempotency_key),
                    ConditionExpression=owned["ConditionExpression"],
                    ExpressionAttributeNames=owned["names"],
                    ExpressionAttributeValues=owned["values"],
                )
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
                logger.info("failure of an abandoned attempt left the later attempt's record")

    return OwnedPersistenceLayer


def _store(partition: str) -> Any:
    """This thread's persistence layer, pointed at ``partition``.

    One layer per thread (the local runtime runs Map iterations in threads; Lambda runs one
    invocation at a time) and per client, table and expiry: building one per invocation would
    register another user-agent hook on the shared boto3 client every time."""
    from relayflow.adapters.aws import client
    from relayflow.settings import get_settings

    settings = get_settings()
    dynamodb = client("dynamodb")
    ident = (id(dynamodb), settings.table_name, settings.step_result_ttl_days)
    layer = getattr(_local, "layer", None)
    if layer is None or getattr(_local, "ident", None) != ident:
        layer = _layer_class()(
            table_name=settings.table_name,
            key_attr=KEY_ATTR,
            sort_key_attr=SORT_KEY_ATTR,
            static_pk_value=partition,
            expiry_attr=EXPIRY_ATTR,
            boto3_client=dynamodb,
        )
        _local.layer, _local.ident = layer, ident
    layer.static_pk_value = partition
    return layer


def _replayed(response: Any, record: Any) -> Any:
    logger.info("step result replayed", extra={"recorded_key": record.idempotency_key})
    return response


def run_recorded(
    identity: StepIdentity, func: Handler, event: Any, context: Any, *, part: bool = False
) -> Any:
    """Run ``func(event, context)`` at most once per ``identity``; return its recorded result
    when it already succeeded.

    ``part`` marks a record of one part of a step execution (an agent's model turn or tool
    call, an ``llm_batch`` submission) rather than of the step's result. A later attempt of
    the same execution replays a completed part instead of taking it over: the step is
    retried because a *later* part failed or its own result was lost, not because this
    part's result was, so acting again would repeat a side effect whose result the step
    already used. It still takes over a part left in progress by an abandoned attempt."""
    from aws_lambda_powertools.utilities.idempotency import (
        IdempotencyConfig,
        idempotent_function,
    )
    from aws_lambda_powertools.utilities.idempotency.exceptions import (
        IdempotencyAlreadyInProgressError,
        IdempotencyInconsistentStateError,
        IdempotencyPersistenceLayerError,
    )

    from relayflow.settings import get_settings

    partition = identity.partition
    config = IdempotencyConfig(
        expires_after_seconds=get_settings().step_result_ttl_days * 86_400,
        hash_function="sha256",
        response_hook=_replayed,
    )
    has_deadline = callable(getattr(context, "get_remaining_time_in_millis", None))
    config.register_lambda_context(context if has_deadline else _Deadline(FALLBACK_DEADLINE_MS))

    def act(*, step: dict[str, Any]) -> Any:
        return func(event, context)

    try:
        store = _store(partition)
    except Exception as exc:  # no region, no endpoint: the step must not act unrecorded
        raise TransientError(f"the step-results table cannot be reached: {exc}") from exc
    store.owner = Owner.of(event, retakes_completed=not part)
    recorded = idempotent_function(
        act,
        data_keyword_argument="step",
        persistence_store=store,
        config=config,
        key_prefix=identity.step_key,
    )
    try:
        return recorded(step=identity.key_data())
    except IdempotencyAlreadyInProgressError as exc:
        raise TransientError(
            f"step '{identity.step_key}' of run {identity.run_id} is already running in "
            "another invocation; retry once it ends"
        ) from exc
    except (IdempotencyPersistenceLayerError, IdempotencyInconsistentStateError) as exc:
        raise TransientError(
            f"the result of step '{identity.step_key}' could not be recorded: {exc}"
        ) from exc


def recorded_step(func: Handler) -> Handler:
    """Decorate a side-effecting step handler (under ``@step_handler``, over
    ``@flow_controlled``): act once per step execution, replay the recorded result after.
    A replayed result never claims a flow-control slot."""

    @functools.wraps(func)
    def wrapper(event: dict[str, Any], context: Any) -> Any:
        identity = step_identity(event)
        if identity is None:
            return func(event, context)
        return run_recorded(identity, func, event, context)

    return wrapper
