"""Compatibility fixes for Distributed Map states (moto 5.2.5), one per finding.

moto runs a ``Mode: DISTRIBUTED`` Map in process: each item is evaluated in a frame of the
parent's interpreter with an event history of its own (so the parent's history stays a few
events long, as on AWS). Measured gaps, each restored here and tested in
``tests/integration/local/test_compat_distributed.py``:

* ``distributed_integer_percentage``: an integer ``ToleratedFailurePercentage`` (``5``, the
  only form AWS's schema accepts) was a parse error (``no viable alternative at input
  '"ToleratedFailurePercentage":5'``); only ``5.0`` parsed (notes row 4).
* ``distributed_jsonl_reader``: ``ReaderConfig.InputType: JSONL`` was refused at parse time
  (``ValueError: 'JSONL' is not a valid InputTypeValue``). AWS reads one JSON value per line.
* ``distributed_tolerated_failures``: every failed child execution was swallowed (the Map
  succeeded with ``null`` for the item) and ``ToleratedFailureCount`` /
  ``ToleratedFailurePercentage`` had no effect. AWS fails the Map Run with
  ``States.ExceedToleratedFailureThreshold`` once failures exceed a threshold (0 by default;
  with both fields set, exceeding either). This fix also runs each worker's items in a loop
  (moto recursed once per item, so a worker of a 10,000-item map ran out of stack) and bounds
  the worker threads (moto started one thread per item when ``MaxConcurrency`` is 0).
* ``distributed_result_writer``: ``ResultWriter`` wrote only a manifest listing no result
  files. AWS writes ``SUCCEEDED_0.json`` and ``FAILED_0.json`` (one record per child execution:
  ``Input``, ``Output`` or ``Error``/``Cause``, ``Status``…) next to a manifest naming them.
"""

from __future__ import annotations

import datetime
import json
import re
import threading
import uuid
import weakref
from dataclasses import dataclass
from typing import Any

from relayflow.local.compat_registry import Patches, fix, runtime_error

#: Most worker threads one Distributed Map runs at once locally (AWS runs up to 10,000 child
#: executions at once; a thread per item would only add contention here).
LOCAL_MAX_WORKERS = 32
#: A tolerance no item count reaches: "this threshold is not set".
_UNSET_COUNT = 2**62
EXCEEDED = "States.ExceedToleratedFailureThreshold"
JSONL = "JSONL"
#: An integer ToleratedFailurePercentage field in a definition's JSON text (not inside a string,
#: where its quotes would be escaped).
_INTEGER_PERCENTAGE = re.compile(r'(?<!\\)("ToleratedFailurePercentage"\s*:\s*)(\d+)(?=\s*[,}])')


@dataclass
class ItemOutcome:
    """What one child execution ended with."""

    index: int
    input: Any
    status: str  # SUCCEEDED | FAILED | ABORTED
    output: Any = None
    error: str | None = None
    cause: str | None = None
    started: str = ""
    stopped: str = ""


#: Map run record → outcome of each item (by index), for the result writer.
_outcomes: weakref.WeakKeyDictionary[Any, dict[int, ItemOutcome]] = weakref.WeakKeyDictionary()
_outcomes_lock = threading.Lock()


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


# --------------------------------------------------------------------------------------------
# Integer ToleratedFailurePercentage
# --------------------------------------------------------------------------------------------


def float_percentages(definition: str) -> str:
    """``definition`` with each integer ``ToleratedFailurePercentage`` written as a float."""
    return _INTEGER_PERCENTAGE.sub(r"\1\2.0", definition)


@fix("distributed_integer_percentage", "notes row 4: integer ToleratedFailurePercentage")
def _integer_percentage(patches: Patches) -> None:
    """The parser reads an integer ``ToleratedFailurePercentage`` as the same float (moto's
    grammar has no rule for an integer there). Wraps the parser that is current when the fix
    is applied (the ``parse_cache`` fix's, normally)."""
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    current = AmazonStateLanguageParser.parse

    def parse(definition: str) -> Any:
        return current(float_percentages(definition))

    patches.set(AmazonStateLanguageParser, "parse", staticmethod(parse))


# --------------------------------------------------------------------------------------------
# JSONL item reader
# --------------------------------------------------------------------------------------------


class _JsonlInputType(str):
    """Stands for ``JSONL`` where moto keeps an ``InputTypeValue`` (an enum without it)."""

    value = JSONL


def parse_jsonl(text: str) -> list[Any]:
    """The items of a JSON lines object: one JSON value per non-blank line. Raises
    ``ValueError`` naming the first line that is not JSON."""
    items: list[Any] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except ValueError as exc:
            raise ValueError(f"line {number} is not JSON: {exc}") from None
    return items


@fix("distributed_jsonl_reader", "moto Distributed Map: ItemReader InputType JSONL")
def _jsonl_reader(patches: Patches) -> None:
    """``InputType: JSONL`` parses, and the object's lines become the items (up to
    ``MaxItems``); a line that is not JSON fails the Map with ``States.ItemReaderFailed``."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.item_reader import (
        item_reader_decl,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.item_reader.eval.resource_output_transformer import (  # noqa: E501
        transformer,
        transformer_factory,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.item_reader.reader_config.input_type import (  # noqa: E501
        InputType,
    )

    original_init = InputType.__init__
    original_factory = transformer_factory.resource_output_transformer_for

    def input_type_init(self: Any, input_type: str) -> None:
        if input_type == JSONL:
            self.input_type_value = _JsonlInputType(JSONL)
        else:
            original_init(self, input_type)

    class JsonlTransformer(transformer.ResourceOutputTransformer):  # type: ignore[misc]
        def _eval_body(self, env: Any) -> None:
            reader_config = env.stack.pop()
            text = env.stack.pop()
            try:
                items = parse_jsonl(text)
            except ValueError as exc:
                raise runtime_error(
                    env, f"JSONL item reader: {exc}", "States.ItemReaderFailed"
                ) from None
            env.stack.append(items[: reader_config["MaxItemsValue"]])

    def transformer_for(input_type: Any) -> Any:
        if isinstance(input_type.input_type_value, _JsonlInputType):
            return JsonlTransformer()
        return original_factory(input_type)

    patches.set(InputType, "__init__", input_type_init)
    patches.set(item_reader_decl, "resource_output_transformer_for", transformer_for)


# --------------------------------------------------------------------------------------------
# Tolerated failures (and a worker loop that scales)
# --------------------------------------------------------------------------------------------


def threshold_exceeded(failed: int, total: int, count: int, percentage: float) -> tuple[bool, str]:
    """Whether ``failed`` of ``total`` items exceed ``count`` or ``percentage``, and the cause
    to report (AWS: the Map Run fails once either threshold is exceeded)."""
    share = 100.0 * failed / total if total else 0.0
    if failed > count:
        return True, f"{failed} of {total} items failed; the tolerated count is {count}"
    if share > percentage:
        return True, (
            f"{failed} of {total} items failed ({share:g}%); the tolerated percentage is "
            f"{percentage:g}%"
        )
    return False, ""


@fix("distributed_tolerated_failures", "notes row 4: DISTRIBUTED maps swallow child failures")
def _tolerated_failures(patches: Patches) -> None:
    """A failed item fails its child execution and counts against the Map Run's tolerance:
    beyond ``ToleratedFailureCount`` or ``ToleratedFailurePercentage`` (0 when neither is
    set; a field not set does not bound) the Map fails with
    ``States.ExceedToleratedFailureThreshold``. Each item's outcome is kept for the result
    writer."""
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
        FailureEventException,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.distributed_iteration_component import (  # noqa: E501
        DistributedIterationComponent,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.itemprocessor.distributed_item_processor_worker import (  # noqa: E501
        DistributedItemProcessorWorker,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.job import (
        JobPool,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.max_concurrency import (
        DEFAULT_MAX_CONCURRENCY_VALUE,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.state_map import StateMap
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.tolerated_failure import (
        ToleratedFailureCountDecl,
        ToleratedFailureCountInt,
        ToleratedFailurePercentage,
        ToleratedFailurePercentageDecl,
    )
    from moto.stepfunctions.parser.asl.eval.program_state import ProgramError, ProgramStopped
    from moto.stepfunctions.parser.asl.eval.states import ItemData, MapData

    original_from_state_props = StateMap.from_state_props

    def from_state_props(self: Any, state_props: Any) -> None:
        # moto defaults an absent field to 0, which would make one field bound the other:
        # a field that is not set must not bound (unless neither is set: then 0 does).
        has_count = state_props.get(ToleratedFailureCountDecl) is not None
        has_percentage = state_props.get(ToleratedFailurePercentageDecl) is not None
        original_from_state_props(self, state_props)
        if has_count and not has_percentage:
            self.tolerated_failure_percentage_decl = ToleratedFailurePercentage(100.0)
        if has_percentage and not has_count:
            self.tolerated_failure_count_decl = ToleratedFailureCountInt(_UNSET_COUNT)

    def eval_job(self: Any, env: Any, job: Any) -> None:
        record = self._map_run_record
        outcome = ItemOutcome(job.job_index, job.job_input, "FAILED", started=_now())
        record.item_counter.total.count()
        record.item_counter.running.count()
        record.execution_counter.total.count()
        record.execution_counter.running.count()
        try:
            env.states.context_object.context_object_data["Map"] = MapData(
                Item=ItemData(Index=job.job_index, Value=job.job_input)
            )
            env.states.reset(job.job_input)
            env.stack.append(env.states.get_input())
            self._eval_input(env_frame=env)
            outcome.input = env.states.get_input()
            job.job_program.eval(env)
            state = env.program_state()
            if isinstance(state, ProgramError):
                details = state.error or {}
                outcome.error, outcome.cause = details.get("error"), details.get("cause")
            elif isinstance(state, ProgramStopped):
                outcome.status = "ABORTED"
            else:
                outcome.status, outcome.output = "SUCCEEDED", env.states.get_input()
        except FailureEventException as exc:
            outcome.error, outcome.cause = exc.extract_error_cause_pair() or (None, None)
        except Exception as exc:  # any crash of one item fails that item only
            outcome.error, outcome.cause = "States.Runtime", str(exc)
        finally:
            outcome.stopped = _now()
            record.item_counter.running.offset(-1)
            record.execution_counter.running.offset(-1)
            counter = {"SUCCEEDED": "succeeded", "FAILED": "failed", "ABORTED": "aborted"}
            getattr(record.item_counter, counter[outcome.status]).count()
            getattr(record.execution_counter, counter[outcome.status]).count()
            with _outcomes_lock:
                _outcomes.setdefault(record, {})[job.job_index] = outcome
            job.job_output = outcome.output

    def eval_worker(self: Any) -> None:
        # moto's _eval_pool recursed once per item; a loop keeps the stack flat.
        # As in moto, the worker's frame goes before its last job closes: the Map waits for
        # the jobs, not for the workers.
        worker_frame = self._env
        job = self._job_pool.next_job()
        if job is None:
            self._env.delete_frame(worker_frame)
        while job is not None:
            job_frame = worker_frame.open_inner_frame()
            self._eval_job(env=job_frame, job=job)
            worker_frame.delete_frame(job_frame)
            stopped = isinstance(job.job_output, Exception) or self.stopped()
            following = None if stopped else self._job_pool.next_job()
            if following is None:
                self._env.delete_frame(worker_frame)
            self._job_pool.close_job(job)
            job = following

    def map_run(self: Any, env: Any, eval_input: Any) -> None:
        items: list[Any] = env.stack.pop()
        record = eval_input.map_run_record
        with _outcomes_lock:
            _outcomes[record] = {}
        pool = JobPool(job_program=self._get_iteration_program(), job_inputs=items)
        limit = record.max_concurrency
        wanted = len(items) if limit == DEFAULT_MAX_CONCURRENCY_VALUE else limit
        for _ in range(max(1, min(wanted, LOCAL_MAX_WORKERS, len(items)))):
            self._launch_worker(env=env, eval_input=eval_input, job_pool=pool)
        pool.await_jobs()
        if pool.get_worker_exception() is not None:
            raise pool.get_worker_exception()
        outcomes = _outcomes.get(record, {})
        failed = sum(1 for o in outcomes.values() if o.status != "SUCCEEDED")
        exceeded, cause = threshold_exceeded(
            failed,
            len(items),
            int(record.tolerated_failure_count),
            float(record.tolerated_failure_percentage),
        )
        if exceeded:
            raise runtime_error(env, cause, EXCEEDED)
        env.stack.append([closed.job_output for closed in pool.get_closed_jobs()])

    patches.set(StateMap, "from_state_props", from_state_props)
    patches.set(DistributedItemProcessorWorker, "_eval_job", eval_job)
    patches.set(DistributedItemProcessorWorker, "eval", eval_worker)
    patches.set(DistributedIterationComponent, "_map_run", map_run)


# --------------------------------------------------------------------------------------------
# Result writer
# --------------------------------------------------------------------------------------------


def result_record(outcome: ItemOutcome, map_run_arn: str) -> dict[str, Any]:
    """One child execution as AWS's ResultWriter lists it in ``SUCCEEDED_n.json`` /
    ``FAILED_n.json`` (input and output are JSON text). A Map Run
    ``…:mapRun:<machine>/<label>:<id>`` runs its children on ``…:stateMachine:<machine>/<label>``
    as ``…:execution:<machine>/<label>:<name>``."""
    head, _, tail = map_run_arn.partition(":mapRun:")
    child_machine = tail.rsplit(":", 1)[0]
    name = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{map_run_arn}#{outcome.index}"))
    record: dict[str, Any] = {
        "ExecutionArn": f"{head}:execution:{child_machine}:{name}",
        "Input": json.dumps(outcome.input, separators=(",", ":")),
        "InputDetails": {"Included": True},
        "Name": name,
        "RedriveCount": 0,
        "RedriveStatus": "NOT_REDRIVABLE",
        "StartDate": outcome.started,
        "StateMachineArn": f"{head}:stateMachine:{child_machine}",
        "Status": outcome.status,
        "StopDate": outcome.stopped,
    }
    if outcome.status == "SUCCEEDED":
        record["Output"] = json.dumps(outcome.output, separators=(",", ":"))
        record["OutputDetails"] = {"Included": True}
    else:
        record["Error"], record["Cause"] = outcome.error, outcome.cause
    return record


def result_file_of(outcome: ItemOutcome) -> str:
    """The result file an outcome goes to: aborted and timed-out children are listed with
    the failed ones."""
    return "SUCCEEDED" if outcome.status == "SUCCEEDED" else "FAILED"


@fix("distributed_result_writer", "moto Distributed Map: ResultWriter writes only a manifest")
def _result_writer(patches: Patches) -> None:
    """``ResultWriter`` (``s3:putObject``) writes ``<prefix>/<map run id>/SUCCEEDED_0.json``
    and ``FAILED_0.json`` (a JSON array of child execution records each, only when not empty)
    and a ``manifest.json`` naming them with their sizes; the Map's output is
    ``{MapRunArn, ResultWriterDetails: {Bucket, Key}}`` with the manifest's key."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.result_writer.resource_eval.resource_eval_s3 import (  # noqa: E501
        ResourceEvalS3,
    )

    def put_object(env: Any, resource_runtime_part: Any, state_credentials: Any) -> None:
        parameters = env.stack.pop()
        env.stack.pop()  # the items' outputs: the records below hold them
        s3 = ResourceEvalS3._get_s3_client(
            resource_runtime_part=resource_runtime_part, state_credentials=state_credentials
        )
        record = env.map_run_record_pool_manager.get_all()[-1]
        with _outcomes_lock:
            outcomes = _outcomes.pop(record, {})
        bucket, prefix = parameters["Bucket"], parameters.get("Prefix", "")
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        folder = prefix + record.map_run_arn.split(":")[-1] + "/"
        files: dict[str, list[dict[str, Any]]] = {"FAILED": [], "PENDING": [], "SUCCEEDED": []}
        for status in ("SUCCEEDED", "FAILED"):
            chosen = [o for _, o in sorted(outcomes.items()) if result_file_of(o) == status]
            if not chosen:
                continue
            body = json.dumps([result_record(o, record.map_run_arn) for o in chosen]).encode()
            key = f"{folder}{status}_0.json"
            s3.put_object(Bucket=bucket, Key=key, Body=body)
            files[status].append({"Key": key, "Size": len(body)})
        manifest = {
            "DestinationBucket": bucket,
            "MapRunArn": record.map_run_arn,
            "ResultFiles": files,
        }
        key = folder + "manifest.json"
        s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(manifest, indent=2).encode())
        env.stack.append(
            {
                "MapRunArn": record.map_run_arn,
                "ResultWriterDetails": {"Bucket": bucket, "Key": key},
            }
        )

    patches.set(ResourceEvalS3, "_handle_put_object", staticmethod(put_object))
