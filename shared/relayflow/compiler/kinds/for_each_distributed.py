"""for_each at scale: a Distributed Map whose items run as child workflow executions.

The items come from the state document (``ItemsPath``, behind the same item-count guard as
an inline for_each) or from an S3 object (``ItemReader`` ``s3:getObject`` with
``ReaderConfig.InputType`` JSON, JSONL or CSV), read under the run's tenant prefix. The
per-item records go to the payload bucket (``ResultWriter`` ``s3:putObject``, under
``for_each/<state machine>/<step>/<map run id>/``) and the step's output is where they went::

    {"bucket": …, "manifest": "<prefix>/<map run id>/manifest.json", "map_run_arn": …}

Child executions are ``STANDARD``: an item step may be a ``sub_workflow`` (a ``.sync``
integration, which EXPRESS workflows cannot run), may retry for longer than EXPRESS's five
minutes, and runs exactly once per item, where EXPRESS children run at least once.
"""

from __future__ import annotations

from typing import Any

from relayflow.compiler.asl import SUCCEEDED
from relayflow.compiler.emitter import Emitter
from relayflow.compiler.kinds.for_each_items import guard_item_count, item_selector
from relayflow.compiler.states import DistributedMap
from relayflow.definition.for_each import items_format_of, split_items_from
from relayflow.definition.models import ForEachStep
from relayflow.expressions import template_to_parameters

S3_GET_OBJECT = "arn:aws:states:::s3:getObject"
S3_PUT_OBJECT = "arn:aws:states:::s3:putObject"
#: Where the ResultWriter writes, under the payload bucket (IAM grants are scoped to it).
RESULTS_PREFIX = "for_each"
_INPUT_TYPES = {"json": "JSON", "jsonl": "JSONL", "csv": "CSV"}


def item_reader(step: ForEachStep) -> dict[str, Any]:
    """The ``ItemReader`` of a for_each with ``items_from``: the object's key is read under
    ``<tenant>/``, so no tenant's workflow can name another tenant's objects."""
    assert step.items_from is not None  # the caller checks
    bucket, key = split_items_from(step.items_from)
    parameters = template_to_parameters({"Bucket": bucket, "Key": "{{ run.tenant }}/" + key})
    assert parameters is not None  # validation admits only keys that render natively
    reader_config: dict[str, Any] = {
        "InputType": _INPUT_TYPES[items_format_of(step.items_from, step.items_format) or "json"]
    }
    if reader_config["InputType"] == "CSV":
        reader_config["CSVHeaderLocation"] = "FIRST_ROW"
    return {"Resource": S3_GET_OBJECT, "ReaderConfig": reader_config, "Parameters": parameters}


def result_writer(bucket: str, machine: str, key: str) -> dict[str, Any]:
    """Results go under ``for_each/<state machine>/<step>/<map run id>/``: the state machine's
    name holds the stage and the tenant, the map run id is new for every run. (A static prefix:
    no reference path whose meaning inside ResultWriter would have to be relied on.)"""
    prefix = f"{RESULTS_PREFIX}/{machine}/{key}"
    return {"Resource": S3_PUT_OBJECT, "Parameters": {"Bucket": bucket, "Prefix": prefix}}


def emit_distributed_for_each(ctx: Emitter, key: str, step: ForEachStep) -> None:
    ctx.c.runners[key] = "native"
    ctx.c.distributed[key] = split_items_from(step.items_from)[0] if step.items_from else None
    items_path = None
    if step.items is not None:
        items_path = guard_item_count(ctx, key, step, step.items)
    tolerance = step.tolerance
    state = DistributedMap(
        items_path=items_path,
        item_reader=item_reader(step) if step.items_from else None,
        item_selector=item_selector(ctx, key, step),
        max_concurrency=step.max_concurrency or None,
        item_processor=ctx.c.compile_item(key, step.step, item_continue=False),
        tolerated_failure_count=tolerance.count if tolerance else None,
        tolerated_failure_percentage=tolerance.percentage if tolerance else None,
        result_writer=result_writer(
            ctx.c.options.payload_bucket, ctx.c.options.state_machine_name(ctx.c.wf.id), key
        ),
        result_selector={
            "output": {
                "bucket.$": "$.ResultWriterDetails.Bucket",
                "manifest.$": "$.ResultWriterDetails.Key",
                "map_run_arn.$": "$.MapRunArn",
            },
            "status": SUCCEEDED,
        },
        result_path=ctx.step_result_path(key),
        retry=ctx.retriers(step.retry) if step.retry else [],
        catch=ctx.catchers(key, None),
    )
    ctx.machine.add(key, ctx.flow(state, key, step.on_success))
