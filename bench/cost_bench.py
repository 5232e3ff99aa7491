"""Estimated AWS cost per 1,000,000 runs of each example workflow, from local runs.

Every example in ``workflows/examples`` runs on the local runtime (one ``LocalRuntime``):
order_triage with its event, payment_retry with both events (settles; card declined),
order_fulfilment with its local resources, order_shipping, whose sub_workflow steps start
shipping_quote children (a child run is billed with its parent: its transitions and
invocations count in the parent's run), shipping_quote on its own (``auto`` runs it on
Express) and support_triage. For each run the bench counts:

- state transitions, from the execution history (see the counting rules below);
- the bytes its executions would write to CloudWatch Logs (``relayflow.cost.logs``): every
  history event as the record Step Functions writes (``relayflow.local.step_logs.log_record``,
  with a deployed execution's ARN), plus 26 bytes each; Express logs every event (level ALL),
  Standard only error events (level ERROR);
- Lambda invocations (``runtime.invocations``) and their GB-seconds;
- AWS calls the step functions make, by service and operation: every boto3 client from
  ``relayflow.adapters.aws.client`` gets a botocore ``before-parameter-build`` handler, and a
  call counts when it happens inside a step's Lambda handler (a thread-local set by a wrapper
  registered for every ``relayflow-<kind>`` function). Calls outside a step (provisioning the
  example's resources, the runtime's own setup) are excluded.

It prints the cost per run and per 1,000,000 runs by service, then the same counts per step
type, against the goal: a code-running step makes at most 1 Lambda invocation and at most 2
DynamoDB writes to the Relayflow table per attempt (a tool's writes to the user's own tables
are the step's work, shown but not held to the goal); a native step makes none. An agent
records each model turn and each tool call it runs (so a duplicate invocation repeats none),
so its goal is 2 writes per recorded turn or call. The tokens of every AI step are printed
with their estimated dollars, and at :data:`REFERENCE_MODEL`'s price (the examples use the
scripted model, which costs nothing).

Counting rules and assumptions:

- State transitions: every ``*StateEntered`` history event is one transition (Map and Parallel
  states, and every state of every Map iteration or Parallel branch, included), plus one per
  Task retry (an attempt after the first in one state entry; Step Functions bills a retry as a
  transition). The per-service table above each example is Standard's.
- Lambda duration: each invocation's measured ``duration_ms`` on this machine, rounded up to
  1 ms as Lambda bills, at 512 MB (``template.yaml``). It is local CPU time in this process, a
  rough proxy for the duration on Graviton. One warm-up pass runs first and is not counted, so
  module imports (cold starts) are left out.
- DynamoDB on-demand: one request unit per item, assuming small items: a write of up to 1 KB,
  a strongly consistent read of up to 4 KB (half a unit when eventually consistent). The
  examples' items are small. Transactions count 2 units per item; Query and Scan count as one
  item each. "Reads" and "writes" in the tables are items; the cost uses request units.
- Other calls are listed by operation. S3 PUT/GET, SES emails and EventBridge custom events
  are priced; everything else is left unpriced (shown, not added to the total).
- Both engines, all-in (``bench/cost_engines.py``): each run is then priced on Step Functions
  Standard and Express with ``relayflow.cost.bill.price_run``, adding what ``run_workflow``
  does not exercise: the start through the control API and the recording of the run's end
  (the recorder on Standard; on Express a native ``UpdateItem``, the deadline marker and the
  maintenance sweep), measured on the local server. Express is priced on the machine it runs
  (``CompileOptions(express=True)``, ``cost_engines.express_machine``); its duration is the
  local run with every scaled Wait and retry interval at its configured length
  (``relayflow.cost.counts.real_duration_ms``) plus the recording states' measured time. The
  summary prints both totals, the saving, which engine ``auto`` picks
  (``relayflow.compiler.engine.choose_engine``), and Express's floor: the request, the run's
  own duration and the steps' own work (``relayflow.cost.bill.express_floor``), the least
  Express can cost whatever starts and records the run, so Standard / floor is the best saving
  any start or recording could reach. A last table prices Express under other starts and
  recordings against issue 19's 20x target (none of them deployed).
- Not included: the Lambda functions' own logs, X-Ray, data transfer, free tiers.

Run: ``make bench`` or ``.venv/bin/python bench/cost_bench.py``.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cost_engines

from relayflow.adapters import aws
from relayflow.compiler import CompiledWorkflow, compile_workflow
from relayflow.compiler.options import local_state_machine_name
from relayflow.control.timeline import history_steps
from relayflow.cost import prices
from relayflow.cost.bill import STEP_MEMORY_MB
from relayflow.cost.counts import real_duration_ms
from relayflow.cost.logs import deployed_execution_arn, execution_log_bytes
from relayflow.definition.models import Workflow
from relayflow.local import LocalRuntime
from relayflow.local.lambda_endpoint import HandlerRegistry, Invocation
from relayflow.local.resources import LocalResources, load_resources
from relayflow.naming import function_name
from relayflow.observability import logger
from relayflow.runner import RunResult, run_workflow
from relayflow.settings import get_settings
from relayflow.validation import validate_data

ROOT = Path(__file__).resolve().parents[1]
RUNS = 1_000_000

# -- prices: relayflow.cost.prices (public us-east-1 list prices, with their sources) -------
SFN_PER_TRANSITION = prices.STANDARD_PER_TRANSITION
LAMBDA_PER_REQUEST = prices.LAMBDA_PER_REQUEST
LAMBDA_PER_GB_SECOND = prices.LAMBDA_PER_GB_SECOND
LAMBDA_MEMORY_GB = STEP_MEMORY_MB / 1024  # MemorySize in template.yaml's Globals
DDB_PER_WRITE_UNIT = prices.DYNAMODB_PER_WRITE_UNIT
DDB_PER_READ_UNIT = prices.DYNAMODB_PER_READ_UNIT
S3_PER_PUT = prices.S3_PER_PUT
S3_PER_GET = prices.S3_PER_GET
SES_PER_EMAIL = prices.SES_PER_EMAIL
EVENTS_PER_EVENT = prices.EVENTS_PER_EVENT

DDB_READS = {"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"}
DDB_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
S3_PUTS = {"PutObject", "CopyObject", "PostObject", "ListObjects", "ListObjectsV2"}
S3_GETS = {"GetObject", "HeadObject"}
SES_SENDS = {("ses", "SendEmail"), ("ses", "SendRawEmail"), ("sesv2", "SendEmail")}

EXAMPLES = [
    ("order_triage", "order_triage.yaml", "order_triage.json", None),
    ("payment_retry", "payment_retry.yaml", "payment_retry.json", None),
    ("payment_retry (declined)", "payment_retry.yaml", "payment_retry_declined.json", None),
    (
        "order_fulfilment",
        "order_fulfilment.yaml",
        "order_fulfilment.json",
        "order_fulfilment.resources.yaml",
    ),
    ("order_shipping", "order_shipping.yaml", "order_shipping.json", None),
    ("shipping_quote", "shipping_quote.yaml", "shipping_quote.json", None),
    (
        "support_triage",
        "support_triage.yaml",
        "support_triage.json",
        "support_triage.resources.yaml",
    ),
]
#: AI steps of the examples use the scripted model ($0); their tokens are also priced at this
#: model's list price (relayflow.ai.prices) to show what the same run would cost on AWS.
REFERENCE_MODEL = ("bedrock", "anthropic.claude-3-5-haiku-20241022-v1:0")
#: Workflows the examples' sub_workflow steps start (each child run is billed too: its
#: transitions and invocations count in its parent's run).
CHILDREN = ["shipping_quote.yaml"]


# -- instrumentation --------------------------------------------------------------------------


@dataclass
class StepCall:
    """The step invocation a handler thread is serving."""

    key: str
    type: str
    seq: int


@dataclass
class AwsCall:
    step: StepCall | None
    service: str
    operation: str
    units: int  # DynamoDB items, EventBridge entries, SES emails; 1 otherwise
    table: str | None = None  # DynamoDB table (single-table operations)
    eventual: bool = False  # an eventually consistent DynamoDB read: half a read unit per item
    thread: str = ""  # the thread that made it (the local server's recorder has its own)


class Recorder:
    """AWS calls made through ``relayflow.adapters.aws.client``, tagged with the step whose
    handler made them (a thread-local set while a step Lambda runs)."""

    def __init__(self) -> None:
        self.calls: list[AwsCall] = []
        self._lock = threading.Lock()
        self._local = threading.local()
        self._seq = 0
        self._instrumented: set[int] = set()

    # boto3 clients
    def install(self) -> None:
        """Wrap ``aws.client`` (and rebind it in modules that imported it already), so every
        client it returns gets the counting handler once."""
        original = aws.client

        def client(service: str) -> Any:
            found = original(service)
            self.instrument(found)
            return found

        for module in list(sys.modules.values()):
            if getattr(module, "client", None) is original:
                module.client = client  # type: ignore[attr-defined]
        aws.client = client  # type: ignore[assignment]

    def instrument(self, boto_client: Any) -> None:
        if id(boto_client) in self._instrumented:
            return
        with self._lock:
            if id(boto_client) in self._instrumented:
                return
            self._instrumented.add(id(boto_client))
        service = boto_client.meta.service_model.service_name

        def before(params: dict[str, Any], model: Any, **_: Any) -> None:
            call = AwsCall(
                getattr(self._local, "step", None),
                service,
                model.name,
                _units(service, model.name, params),
                table=params.get("TableName") if service == "dynamodb" else None,
                eventual=service == "dynamodb"
                and model.name in ("GetItem", "Query", "Scan")
                and not params.get("ConsistentRead"),
                thread=threading.current_thread().name,
            )
            with self._lock:
                self.calls.append(call)

        boto_client.meta.events.register("before-parameter-build.*.*", before)

    # step handlers
    def wrap(self, handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        def wrapped(event: Any, context: Any) -> Any:
            step = event.get("step") if isinstance(event, dict) else None
            with self._lock:
                self._seq += 1
                seq = self._seq
            self._local.step = (
                StepCall(str(step.get("key")), str(step.get("type")), seq)
                if isinstance(step, dict)
                else StepCall("?", "?", seq)
            )
            try:
                return handler(event, context)
            finally:
                self._local.step = None

        return wrapped


def _units(service: str, operation: str, params: dict[str, Any]) -> int:
    if service == "dynamodb":
        if operation == "BatchWriteItem":
            return sum(len(v) for v in (params.get("RequestItems") or {}).values())
        if operation == "BatchGetItem":
            return sum(len(v.get("Keys", [])) for v in (params.get("RequestItems") or {}).values())
        if operation in ("TransactWriteItems", "TransactGetItems"):
            return 2 * len(params.get("TransactItems") or [])
    if service == "events" and operation == "PutEvents":
        return len(params.get("Entries") or [])
    if (service, operation) in SES_SENDS:
        # SES bills every recipient as one email; SendRawEmail may name none (1 then).
        destination = params.get("Destination") or {}
        return max(
            1,
            sum(
                len(destination.get(k) or [])
                for k in ("ToAddresses", "CcAddresses", "BccAddresses")
            ),
        )
    return 1


def register_step_handlers(rt: LocalRuntime, recorder: Recorder) -> None:
    """Serve every ``relayflow-<kind>`` function with its real handler (loaded as the runtime
    loads it), wrapped to mark the thread with the step it serves."""
    registry = HandlerRegistry({}, rt.functions_dir, region=rt.region, account=rt.account)
    for app in sorted(rt.functions_dir.glob("*/app.py")):
        name = function_name(app.parent.name)
        real = registry.resolve(name)
        if real is not None:
            rt.register_handler(name, recorder.wrap(real))


# -- measuring one run ------------------------------------------------------------------------


@dataclass
class RunUsage:
    label: str
    status: str
    wall_ms: float
    transitions: int = 0
    entered: int = 0
    retries: int = 0
    invocations: list[Invocation] = field(default_factory=list)
    calls: list[AwsCall] = field(default_factory=list)
    steps: list[Any] = field(default_factory=list)
    runners: dict[str, str] = field(default_factory=dict)
    #: The run's execution as Express would bill it: its duration with the scaled waits
    #: restored (relayflow.cost.counts.real_duration_ms), the definition's size, the
    #: largest state input and the Map iterations plus Parallel states (AWS's memory estimate).
    duration_ms: float = 0.0
    definition_bytes: int = 0
    data_bytes: int = 0
    fan_out: int = 0
    #: CloudWatch Logs bytes of the run's executions (its children's included) at the
    #: Express level (ALL: every event) and the Standard one (ERROR), and the events logged.
    express_log_bytes: int = 0
    standard_log_bytes: int = 0
    log_events: int = 0
    workflow: Workflow | None = None
    compiled: CompiledWorkflow | None = None

    @property
    def gb_seconds(self) -> float:
        return sum(math.ceil(i.duration_ms) for i in self.invocations) / 1000 * LAMBDA_MEMORY_GB

    def units(self, service: str, operations: set[str], *, table: str | None = None) -> int:
        return sum(
            c.units
            for c in self.calls
            if c.service == service
            and c.operation in operations
            and (table is None or c.table == table)
        )

    @property
    def read_units(self) -> float:
        """Billed read request units: 1 per item, half for an eventually consistent read."""
        return sum(
            c.units * (0.5 if c.eventual else 1.0)
            for c in self.calls
            if c.service == "dynamodb" and c.operation in DDB_READS
        )

    @property
    def other_calls(self) -> Counter[tuple[str, str]]:
        return Counter(
            (c.service, c.operation)
            for c in self.calls
            if not (c.service == "dynamodb" and c.operation in DDB_READS | DDB_WRITES)
        )

    def costs(self) -> list[tuple[str, str, float | None]]:
        """(service, usage per run, dollars per run or None when unpriced)."""
        writes, reads = self.units("dynamodb", DDB_WRITES), self.read_units
        rows: list[tuple[str, str, float | None]] = [
            (
                "Step Functions",
                f"{self.transitions} transitions",
                self.transitions * SFN_PER_TRANSITION,
            ),
            (
                "Lambda requests",
                f"{len(self.invocations)} invocations",
                len(self.invocations) * LAMBDA_PER_REQUEST,
            ),
            (
                "Lambda duration",
                f"{self.gb_seconds:.4f} GB-s",
                self.gb_seconds * LAMBDA_PER_GB_SECOND,
            ),
            ("DynamoDB writes", f"{writes} WRU", writes * DDB_PER_WRITE_UNIT),
            ("DynamoDB reads", f"{reads:g} RRU", reads * DDB_PER_READ_UNIT),
        ]
        for service, operation in sorted(self.other_calls):
            units = sum(
                c.units for c in self.calls if (c.service, c.operation) == (service, operation)
            )
            price = _other_price(service, operation)
            usage = f"{units} {'call' if units == 1 else 'calls'}"
            if service == "events" and operation == "PutEvents":
                usage = f"{units} {'event' if units == 1 else 'events'}"
            elif (service, operation) in SES_SENDS:
                usage = f"{units} {'email' if units == 1 else 'emails'}"
            rows.append((f"{service}:{operation}", usage, None if price is None else units * price))
        return rows


def _other_price(service: str, operation: str) -> float | None:
    if service == "s3" and operation in S3_PUTS:
        return S3_PER_PUT
    if service == "s3" and operation in S3_GETS:
        return S3_PER_GET
    if (service, operation) in SES_SENDS:
        return SES_PER_EMAIL
    if service == "events" and operation == "PutEvents":
        return EVENTS_PER_EVENT
    return None


def load_workflow(name: str) -> tuple[Workflow, CompiledWorkflow]:
    import yaml

    data = yaml.safe_load((ROOT / "workflows" / "examples" / name).read_text(encoding="utf-8"))
    workflow, problems = validate_data(data)
    assert workflow is not None, problems
    return workflow, compile_workflow(workflow)


def measure(
    rt: LocalRuntime,
    recorder: Recorder,
    label: str,
    workflow: Workflow,
    compiled: CompiledWorkflow,
    trigger: Any,
    resources: LocalResources | None,
    children: dict[str, Workflow] | None = None,
) -> RunUsage:
    invocations_before, calls_before = len(rt.invocations), len(recorder.calls)
    executions_before = set(rt.list_executions())
    started = time.perf_counter()
    result: RunResult = run_workflow(
        workflow, trigger, runtime=rt, resources=resources, workflows=children
    )
    wall_ms = (time.perf_counter() - started) * 1000
    # Child runs' steps are billed with the run: their invocations are told apart by the
    # children's own runners (step keys are unique per workflow, rarely across them).
    runners = {
        key: runner
        for child in (children or {}).values()
        for key, runner in compile_workflow(child).step_runners.items()
    }
    usage = RunUsage(
        label,
        result.status,
        wall_ms,
        steps=result.steps,
        runners={**runners, **compiled.step_runners},
    )
    usage.invocations = rt.invocations[invocations_before:]
    usage.calls = [c for c in recorder.calls[calls_before:] if c.step is not None]
    # The run's execution and the child executions its sub_workflow steps started (their
    # steps count with the run's).
    by_machine = {local_state_machine_name(c.id): c for c in (children or {}).values()}
    for arn in sorted(set(rt.list_executions()) - executions_before):
        record = rt.describe(arn)
        child = by_machine.get(arn.split(":")[6])
        if child is not None and not arn.endswith(f":{result.run_id}"):
            usage.steps += history_steps(
                {key: step.type for key, step in child.steps.items()},
                compile_workflow(child).step_runners,
                record.events,
            )
        usage.entered += sum(
            1 for e in record.events if str(e.get("type", "")).endswith("StateEntered")
        )
        workflow_id, name = (child or workflow).id, arn.split(":")[7]
        usage.express_log_bytes += execution_log_bytes(
            record.events, deployed_execution_arn(workflow_id, name, express=True), "ALL"
        )
        usage.standard_log_bytes += execution_log_bytes(
            record.events, deployed_execution_arn(workflow_id, name, express=False), "ERROR"
        )
        usage.log_events += len(record.events)
        usage.retries += sum(max(0, s.attempts - 1) for s in record.states)
    usage.transitions = usage.entered + usage.retries
    parent = [
        a for a in set(rt.list_executions()) - executions_before if a.endswith(f":{result.run_id}")
    ]
    events = rt.describe(parent[0]).events if parent else []
    usage.duration_ms = real_duration_ms(events, compiled.asl, rt.time_scale)
    usage.definition_bytes = len(json.dumps(compiled.asl, separators=(",", ":")).encode())
    usage.data_bytes = max((_input_bytes(e) for e in events), default=0)
    usage.fan_out = sum(
        1 for e in events if e.get("type") in ("MapIterationStarted", "ParallelStateEntered")
    )
    usage.workflow, usage.compiled = workflow, compiled
    return usage


def _input_bytes(event: dict[str, Any]) -> int:
    details = event.get("stateEnteredEventDetails") or {}
    text = details.get("input")
    return len(text.encode()) if isinstance(text, str) else 0


# -- report -----------------------------------------------------------------------------------


def money(value: float | None, digits: int = 2) -> str:
    return "unpriced" if value is None else f"${value:,.{digits}f}"


def print_example(usage: RunUsage, trigger_file: str) -> float:
    writes, reads = usage.units("dynamodb", DDB_WRITES), usage.units("dynamodb", DDB_READS)
    table = get_settings().table_name
    own_writes = usage.units("dynamodb", DDB_WRITES, table=table)
    own_reads = usage.units("dynamodb", DDB_READS, table=table)
    other = sum(usage.other_calls.values())
    print(f"\n{usage.label}  ({trigger_file}: {usage.status}, {usage.wall_ms:.0f} ms locally)")
    print(
        f"  per run: {usage.transitions} transitions ({usage.entered} states entered + "
        f"{usage.retries} retries), {len(usage.invocations)} Lambda invocations "
        f"({usage.gb_seconds:.4f} GB-s), DynamoDB {reads} reads ({own_reads} of the Relayflow "
        f"table) / {writes} writes ({own_writes} of the Relayflow table), {other} other AWS calls"
    )
    print(f"  {'service':<28} {'usage per run':>18} {'$ per run':>14} {'$ per 1M runs':>14}")
    total = 0.0
    for service, amount, dollars in usage.costs():
        total += dollars or 0.0
        per_run = "unpriced" if dollars is None else f"{dollars:.8f}"
        per_million = money(None if dollars is None else dollars * RUNS)
        print(f"  {service:<28} {amount:>18} {per_run:>14} {per_million:>14}")
    print(f"  {'total (priced)':<28} {'':>18} {total:>14.8f} {money(total * RUNS):>14}")
    print_ai_steps(usage)
    return total


def print_ai_steps(usage: RunUsage) -> None:
    """Tokens and dollars of every agent / llm_batch step execution of the run (its output's
    ``usage``), and the same tokens at :data:`REFERENCE_MODEL`'s price."""
    from relayflow.ai.messages import Usage
    from relayflow.ai.prices import estimate_cost

    for invocation in usage.invocations:
        if not invocation.function_name.endswith(("-agent", "-llm_batch")):
            continue
        output = (
            (invocation.result or {}).get("output") if isinstance(invocation.result, dict) else None
        )
        tokens = output.get("usage") if isinstance(output, dict) else None
        if not isinstance(tokens, dict):
            continue  # a batch still in progress, or a suspended agent
        step = ((invocation.payload or {}).get("step") or {}).get("key")
        spent = Usage(int(tokens.get("input_tokens") or 0), int(tokens.get("output_tokens") or 0))
        reference = estimate_cost(*REFERENCE_MODEL, spent, batch=bool(tokens.get("batch")))
        print(
            f"  AI step {step}: {spent.input_tokens} input + {spent.output_tokens} output tokens "
            f"on {tokens.get('model')}, {money(tokens.get('estimated_cost_usd'), 6)} per run; at "
            f"{':'.join(REFERENCE_MODEL)} {money(reference, 6)} per run, "
            f"{money(None if reference is None else reference * RUNS)} per 1M runs"
        )


@dataclass
class TypeRow:
    executions: int = 0
    attempts: int = 0
    invocations: int = 0
    writes: int = 0
    reads: int = 0
    other: int = 0
    max_writes_per_invocation: int = 0
    #: Writes to the Relayflow table only: the platform's own cost of a step (flow control,
    #: breakers, recorded results). A tool's writes to the user's tables are its work.
    max_own_writes_per_invocation: int = 0
    #: Side effects one invocation records (an agent records each model turn and each tool
    #: call it runs, so a duplicate invocation runs none of them twice); 1 for other steps.
    max_recorded_units: int = 1


def step_type_rows(runs: list[RunUsage]) -> dict[tuple[str, str], TypeRow]:
    rows: dict[tuple[str, str], TypeRow] = defaultdict(TypeRow)
    table = get_settings().table_name
    for usage in runs:
        for step in usage.steps:
            row = rows[(step.type, step.runner)]
            row.executions += 1
            row.attempts += max(step.attempts, 1)
        for inv in usage.invocations:
            step = inv.payload.get("step") if isinstance(inv.payload, dict) else None
            key = str(step.get("key")) if isinstance(step, dict) else "?"
            kind = str(step.get("type")) if isinstance(step, dict) else "?"
            row = rows[(kind, usage.runners.get(key, "native"))]
            row.invocations += 1
            row.max_recorded_units = max(row.max_recorded_units, recorded_units(inv))
        per_invocation: Counter[int] = Counter()
        own_per_invocation: Counter[int] = Counter()
        for call in usage.calls:
            assert call.step is not None
            row = rows[(call.step.type, usage.runners.get(call.step.key, "native"))]
            if call.service == "dynamodb" and call.operation in DDB_WRITES:
                row.writes += call.units
                per_invocation[call.step.seq] += call.units
                row.max_writes_per_invocation = max(
                    row.max_writes_per_invocation, per_invocation[call.step.seq]
                )
                if call.table == table:
                    own_per_invocation[call.step.seq] += call.units
                    row.max_own_writes_per_invocation = max(
                        row.max_own_writes_per_invocation, own_per_invocation[call.step.seq]
                    )
            elif call.service == "dynamodb" and call.operation in DDB_READS:
                row.reads += call.units
            else:
                row.other += 1
    return rows


def recorded_units(inv: Invocation) -> int:
    """Model turns plus tool calls an agent invocation ran (each recorded once); 1 otherwise."""
    output = inv.result.get("output") if isinstance(inv.result, dict) else None
    if not isinstance(output, dict) or "turns" not in output:
        return 1
    ran = [c for c in output.get("tool_calls") or [] if c.get("status") in ("succeeded", "failed")]
    return int(output["turns"]) + len(ran)


def print_step_types(runs: list[RunUsage]) -> bool:
    rows = step_type_rows(runs)
    print("\nper step type, all runs above (an execution is one step run, a for_each item each;")
    print("attempts = 1 + retries; the goal is checked per attempt: a code-running step makes at")
    print("most 1 Lambda invocation and 2 DynamoDB writes to the Relayflow table per attempt,")
    print("a native step 0 and 0; 'max writes' also counts writes to the user's tables)")
    header = (
        f"{'step type':<11} {'runs on':<12} {'execs':>5} {'attempts':>8} {'inv/exec':>8} "
        f"{'inv/attempt':>11} {'writes/exec':>11} {'max writes':>10} {'max own':>7} "
        f"{'reads/exec':>10} {'other/exec':>10}  goal"
    )
    print(header)
    all_ok = True
    for (kind, runner), row in sorted(rows.items(), key=lambda kv: (kv[0][1] == "native", kv[0])):
        execs = max(row.executions, 1)
        per_attempt = row.invocations / max(row.attempts, 1)
        if runner == "native":
            ok = row.invocations == 0 and row.writes == 0
            limit = "0 inv, 0 writes"
        elif row.max_recorded_units > 1:
            ok = (
                per_attempt <= 1 and row.max_own_writes_per_invocation <= 2 * row.max_recorded_units
            )
            limit = "<=1 inv, <=2 own writes per recorded turn or tool call"
        else:
            ok = per_attempt <= 1 and row.max_own_writes_per_invocation <= 2
            limit = "<=1 inv, <=2 own writes"
        all_ok &= ok
        runs_on = runner if runner == "native" else f"λ {runner}"
        print(
            f"{kind:<11} {runs_on:<12} {row.executions:>5} {row.attempts:>8} "
            f"{row.invocations / execs:>8.2f} {per_attempt:>11.2f} {row.writes / execs:>11.2f} "
            f"{row.max_writes_per_invocation:>10} {row.max_own_writes_per_invocation:>7} "
            f"{row.reads / execs:>10.2f} "
            f"{row.other / execs:>10.2f}  {'met' if ok else 'MISSED'} ({limit})"
        )
    return all_ok


@dataclass
class Measured:
    """One bench run: every example's usage, priced on both engines (``rows``, in the order of
    :data:`EXAMPLES`), and what the platform around the machines costs."""

    runs: list[RunUsage]
    rows: list[cost_engines.Compared]
    platform: cost_engines.Platform
    #: AWS calls made outside any step (provisioning, setup), excluded from the bills.
    outside: int


def collect() -> Measured:
    """Run every example on the local runtime (a warm-up pass first) and price each run;
    prints nothing. ``tools/gen_cost_docs.py`` writes the docs' tables from this."""
    recorder = Recorder()
    recorder.install()
    # The declined card's failed attempts log warnings by design; keep the report readable.
    logger.setLevel("ERROR")
    examples = []
    for label, workflow_file, event_file, resources_file in EXAMPLES:
        workflow, compiled = load_workflow(workflow_file)
        trigger = json.loads((ROOT / "events" / "examples" / event_file).read_text())
        resources = (
            load_resources(ROOT / "workflows" / "examples" / "local" / resources_file)
            if resources_file
            else None
        )
        examples.append((label, workflow, compiled, trigger, resources, event_file))
    children = {w.id: w for w, _ in (load_workflow(name) for name in CHILDREN)}
    with LocalRuntime(time_scale=0.001) as rt:
        register_step_handlers(rt, recorder)
        for label, workflow, compiled, trigger, resources, _ in examples:  # warm-up, not counted
            measure(rt, recorder, label, workflow, compiled, trigger, resources, children)
        runs = []
        for label, workflow, compiled, trigger, resources, _ in examples:
            runs.append(
                measure(rt, recorder, label, workflow, compiled, trigger, resources, children)
            )
        outside = sum(1 for c in recorder.calls if c.step is None)
    platform = cost_engines.measure_platform(lambda: recorder.calls)
    rows = []
    for usage in runs:
        assert usage.workflow is not None and usage.compiled is not None
        bills = cost_engines.engine_bills(
            usage, platform, cost_engines.express_machine(usage.workflow)
        )
        choice = cost_engines.auto_engine(usage.workflow)
        floor = cost_engines.floor_bill(usage)
        rows.append(cost_engines.Compared(usage.label, choice.engine, bills, floor))
    return Measured(runs, rows, platform, outside)


def main() -> None:
    started = time.perf_counter()
    measured = collect()
    runs, platform = measured.runs, measured.platform
    print("estimated AWS cost of the example workflows, us-east-1 list prices (see the docstring)")
    print(
        "Lambda: arm64, 512 MB, duration = local handler time rounded up to 1 ms (a rough proxy);"
        " DynamoDB: 1 unit per item (<=1 KB write, <=4 KB read; 0.5 if eventually consistent)"
    )
    print(
        "figures: transitions, invocations, calls, units, log events and bytes are counts (the "
        "same every run); Lambda, Express and recording durations are wall time measured "
        "locally, so the dollars built on them move by cents; saving, best and '20x needs' are "
        "ratios"
    )
    for usage, row, example in zip(runs, measured.rows, EXAMPLES, strict=True):
        print_example(usage, example[2])
        assert usage.workflow is not None
        choice = cost_engines.auto_engine(usage.workflow)
        cost_engines.print_engines(usage, row.bills, choice, platform, row.floor)
    cost_engines.print_platform(platform)
    all_ok = print_step_types(runs)
    print(f"\nAWS calls outside any step (provisioning, setup; excluded): {measured.outside}")
    print(
        "not included: the Lambda functions' own logs, X-Ray, data transfer, free tiers; "
        "unpriced calls are listed but not added"
    )
    cost_engines.print_summary(measured.rows)
    cost_engines.print_what_if(measured.rows, platform)
    failed = [u.label for u in runs if u.status != "succeeded"]
    verdict = "met by every step type" if all_ok else "MISSED (see the rows marked MISSED)"
    print(
        "goal (code-running step: <=1 Lambda invocation and <=2 Relayflow-table writes per "
        "attempt; "
        f"native step: 0 and 0): {verdict}"
    )
    if failed:
        print(f"runs that did not succeed: {', '.join(failed)}")
    print(f"bench time {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
