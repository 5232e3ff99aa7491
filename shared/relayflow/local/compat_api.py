"""Compatibility fixes to moto's service APIs around the interpreter: history paging,
unnamed executions, a starting execution's status, atomic DynamoDB requests, and the parse
cache.

Registered through :mod:`relayflow.local.compat_registry` on import; applied in the order
:data:`relayflow.local.compat.FAMILIES` gives.
"""

from __future__ import annotations

import functools
import threading
import uuid
from typing import Any

from relayflow.local.compat_registry import Patches, fix, history_page


@fix("history_paging", "notes row 13")
def _history_paging(patches: Patches) -> None:
    """``GetExecutionHistory`` honours ``maxResults`` (default 100, at most 1000),
    ``nextToken`` and ``reverseOrder``, as the AWS API does. moto ignored all three."""
    from moto.stepfunctions.responses import StepFunctionResponse

    def get_execution_history(self: Any) -> Any:
        arn = self._get_param("executionArn")
        history = self.stepfunction_backend.get_execution_history(arn)
        return history_page(self, list(history["events"]))

    patches.set(StepFunctionResponse, "get_execution_history", get_execution_history)


@fix("unnamed_start_execution", "notes row 11")
def _unnamed_start_execution(patches: Patches) -> None:
    """``StartExecution`` without a ``name`` gets a generated UUID name on AWS. moto named the
    execution literally ``None``, so a second unnamed start raised ``ExecutionAlreadyExists``.
    (:meth:`LocalRuntime.start_execution` always passes a name as well.)"""
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    original = StepFunctionsParserBackend.start_execution

    def start_execution(
        self: Any,
        state_machine_arn: str,
        name: str | None = None,
        execution_input: str | None = None,
        trace_header: str | None = None,
    ) -> Any:
        return original(
            self, state_machine_arn, name or str(uuid.uuid4()), execution_input, trace_header
        )

    patches.set(StepFunctionsParserBackend, "start_execution", start_execution)


@fix("starting_execution_status", "local runtime: concurrent starts")
def _starting_execution_status(patches: Patches) -> None:
    """An execution a caller can see is at least ``RUNNING``: ``StartExecution`` is atomic on
    AWS. moto lists a new execution before it marks it running, so a ``DescribeExecution`` or
    ``ListExecutions`` in that window (a repeated start checking the first one's execution)
    raised ``AttributeError: 'NoneType' object has no attribute 'value'`` inside moto."""
    from moto.stepfunctions.parser.api import ExecutionStatus
    from moto.stepfunctions.parser.backend.execution import Execution

    original = Execution.__dict__["status"]

    def status(self: Any) -> Any:
        if self.exec_status is None:
            return ExecutionStatus.RUNNING.value
        return original.fget(self)

    patches.set(Execution, "status", property(status))


@fix("dynamodb_atomic_requests", "local runtime: concurrent handlers")
def _dynamodb_atomic_requests(patches: Patches) -> None:
    """DynamoDB applies each request to an item atomically: a conditional write checks and
    writes as one step, and a read sees an item before or after a write. moto's handler does
    neither under threads (the local runtime runs Map iterations, the recorder and API
    requests in threads): it checks a condition, then writes, and turns an item into its
    response while another thread changes the same dict, which raised ``RuntimeError:
    dictionary changed size during iteration`` as a 500 in ``relayflow serve``. One lock
    around each DynamoDB request makes every request atomic (requests to other items wait a
    little too; throughput is not what the local runtime measures)."""
    from moto.dynamodb.responses import DynamoHandler

    lock = threading.RLock()
    original = DynamoHandler.call_action

    def call_action(self: Any) -> Any:
        with lock:
            return original(self)

    patches.set(DynamoHandler, "call_action", call_action)


@fix("dynamodb_query_partition", "local runtime: Query cost grows with the table")
def _dynamodb_query_partition(patches: Patches) -> None:
    """DynamoDB answers a Query from the partitions it names: its cost is that of the items
    it reads, whatever else the table holds. moto 5.2.5 builds and sorts a list of every item
    of the table for each Query (``Table.all_items``), under the one request lock above, so
    ``relayflow serve`` slowed with every run stored (``GET /runs/{id}``: 80 → 296 ms after
    1,200 runs) and the recorder fell behind a burst. A Query on the table now reads only the
    partition of its key; a Query on an index reads the items unsorted (moto sorts the
    matches itself), never sorting the whole table. Answers, order and pages are moto's."""
    from moto.dynamodb.models.table import Table

    original_query, original_all_items = Table.query, Table.all_items
    scope = threading.local()

    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
        scope.query = (self, None if index_name else hash_key)
        try:
            return original_query(self, hash_key, *args, **kwargs)
        finally:
            scope.query = None

    def all_items(self: Any) -> list[Any]:
        current = getattr(scope, "query", None)
        if current is None or current[0] is not self:
            return original_all_items(self)
        hash_key = current[1]
        if hash_key is None:  # an index: every item, unsorted
            partitions = list(self.items.values())
        else:
            found = self.items.get(hash_key)
            partitions = [found] if found is not None else []
        if self.range_key_attr:
            return [item for partition in partitions for item in partition.values()]
        return partitions

    patches.set(Table, "query", query)
    patches.set(Table, "all_items", all_items)


@fix("parse_cache", "notes row 18")
def _parse_cache(patches: Patches) -> None:
    """moto re-parses the ASL (ANTLR, about 1 ms per state) on every create and every
    execution, and re-parses each ``ResultPath`` JSONPath on every use. Parsed programs are
    now cached by definition text; they are already shared between concurrent Map iterations,
    so sharing them between executions is safe once the lazily created ``heap_key`` of a
    component is made thread-safe."""
    from moto.stepfunctions.parser.asl.component.common.path import result_path
    from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
    from moto.stepfunctions.parser.utils import long_uid

    original_parse = AmazonStateLanguageParser.parse
    heap_lock = threading.Lock()
    attr = "_EvalComponent__heap_key"

    @functools.lru_cache(maxsize=256)
    def cached_parse(definition: str) -> Any:
        return original_parse(definition)

    def heap_key(self: Any) -> str:
        key = self.__dict__.get(attr)
        if key is None:
            with heap_lock:
                key = self.__dict__.get(attr)
                if key is None:
                    key = long_uid()
                    self.__dict__[attr] = key
        return key

    @functools.lru_cache(maxsize=4096)
    def cached_jsonpath_parse(path: str) -> Any:
        from jsonpath_ng import parse

        return parse(path)

    patches.set(AmazonStateLanguageParser, "parse", staticmethod(cached_parse))
    patches.set(EvalComponent, "heap_key", property(heap_key))
    patches.set(result_path, "parse", cached_jsonpath_parse)
