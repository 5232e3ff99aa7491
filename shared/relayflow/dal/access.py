"""What each deployed function may do in the Relayflow table: DynamoDB actions per key family.

This map is the source of truth for the DynamoDB statements of every function's role in
``template.yaml``. ``tests/deploy/test_iam_agreement.py`` keeps the three in step:

* the template grants each function exactly these statements (actions, ``dynamodb:LeadingKeys``
  patterns, base table or GSI1) and nothing else in the table;
* every DynamoDB call a handler makes against moto — its ``events/`` samples, and the calls
  recorded from the integration suite (``tests/deploy/dynamodb_calls.json``) — is allowed by
  its function's grants.

Key families are ``dynamodb:LeadingKeys`` patterns (IAM ``StringLike``: ``*`` matches any
text). Key parts never contain ``#`` (``relayflow.dal.keys``), so ``TENANT#*#RUN#*`` reaches
run items and nothing else. For a Query on GSI1 the condition applies to the index's
partition key (``gsi1pk``). No function scans: with ``ForAllValues`` an empty set of leading
keys would match, so Scan is never granted. Transactions are authorized per item action
(``PutItem``, ``UpdateItem``, ``DeleteItem``), so they need no action of their own.
"""

from __future__ import annotations

from dataclasses import dataclass

GET = "dynamodb:GetItem"
PUT = "dynamodb:PutItem"
UPDATE = "dynamodb:UpdateItem"
DELETE = "dynamodb:DeleteItem"
QUERY = "dynamodb:Query"

# -- key families (partition keys of the table, or of GSI1) ------------------------------------

WORKFLOWS = "TENANT#*#WF#*"  # head, versions; GSI1 runs (…#RUNS) and hooks (…#HOOKS) of one
WORKFLOW_LIST = "TENANT#*#WFS"  # GSI1: a tenant's workflows
RUNS = "TENANT#*#RUN#*"  # run items; GSI1 a run's waitpoints (…#WAITPOINTS)
STEP_RESULTS = "TENANT#*#STEP#*"
WAITS = "TENANT#*#WAIT#*"  # approval requests and waitpoints
APPROVAL_LIST = "TENANT#*#APPROVALS"  # GSI1
PARK_LIST = "TENANT#*#PARKS"  # GSI1: a tenant's parks (relayflow.dal.parks)
FLOW = "TENANT#*#FLOW#*"  # flow-control leases and rate windows
BREAKERS = "TENANT#*#BREAKER#*"  # a breaker and its audit items
BREAKER_LIST = "TENANT#*#BREAKERS"  # GSI1
DLQ_ENTRIES = "TENANT#*#DLQ#*"
DLQ_LIST = "TENANT#*#DLQS"  # GSI1
DLQ_DUE = "DLQ#DUE"  # automatic retries by due time
DLQ_STATS = "DLQ#STATS"  # the DLQ's depth counter
HOOKS = "HOOK#*"  # webhook slug registrations (and, by prefix, their windows and deliveries)
HOOK_RATE_WINDOWS = "HOOK#*#RATE"  # an endpoint's sliding rate window
HOOK_SIGNATURE_FAILURES = "HOOK#*#SIGFAIL#*"  # failed signature checks per source
HOOK_DELIVERIES = "HOOK#*#DLV#*"
API_KEYS = "KEY#*"
# Run admission (relayflow.dal.admission, docs/flow-control.md).
GATES = "TENANT#*#GATE#*"  # singleton and concurrency slots and queues
DEBOUNCES = "TENANT#*#DEBOUNCE#*"  # a key's pending debounced run
BATCHES = "TENANT#*#BATCH#*"  # a key's open batch and its triggers
SCHEDULE_MARKS = "TENANT#*#SCHED#*"  # a cron trigger's last started tick (catch_up)
EVENT_WAITS = "TENANT#*#WAIT#EVENT.*"  # wait_for_event registrations
WORKFLOW_RUNS = "TENANT#*#WF#*#RUNS"  # GSI1: a workflow's runs
STEP_TRACES = "TENANT#*#STEPEV#*"  # per-step lifecycle events: where each state stands
EXPRESS_DUE = "EXPRESS#DUE"  # running Express runs by deadline (relayflow.dal.express)


@dataclass(frozen=True)
class TableGrant:
    """One statement: ``actions`` on the items whose partition key matches one of
    ``leading_keys``; ``index`` means on GSI1 (Query only), else the base table."""

    sid: str
    actions: tuple[str, ...]
    leading_keys: tuple[str, ...]
    index: bool = False


_FLOW_CONTROL = TableGrant("FlowControlItems", (GET, PUT, UPDATE, DELETE, QUERY), (FLOW,))
_STEP_RESULTS = TableGrant("StepResultItems", (GET, PUT, UPDATE, DELETE), (STEP_RESULTS,))
# Whoever starts runs passes admission: take, hand over and free slots (transactions), queue,
# fold debounced and batched triggers.
_ADMISSION = TableGrant(
    "AdmissionItems", (GET, PUT, UPDATE, DELETE, QUERY), (GATES, DEBOUNCES, BATCHES)
)
# Cron catch_up: a mark per trigger, read and moved forward (on enable and at each tick).
_SCHEDULE_MARKS = TableGrant("ScheduleMarks", (GET, UPDATE), (SCHEDULE_MARKS,))
# Tool calls: flow control, the tools' circuit breakers (a trip is one transaction, authorized
# per item), recorded step results.
_TOOL = (
    TableGrant("FlowControlAndBreakerItems", (GET, PUT, UPDATE, DELETE, QUERY), (FLOW, BREAKERS)),
    _STEP_RESULTS,
)
# Starting a run: read the workflow and version, skip when its breaker is open, create the
# run item (deleted again when the execution cannot be created), record the execution.
# An Express run's start writes its deadline marker (docs/engines.md).
_EXPRESS_START = TableGrant("ExpressDeadlines", (PUT,), (EXPRESS_DUE,))
_START_RUNS = (
    TableGrant("ReadWorkflows", (GET,), (WORKFLOWS, BREAKERS)),
    TableGrant("RunItems", (GET, PUT, UPDATE, DELETE), (RUNS,)),
    _EXPRESS_START,
)
#: An Express run's timeline is what its steps recorded (relayflow.control.express_timeline).
_READ_STEP_RESULTS = TableGrant("ReadStepResults", (QUERY,), (STEP_RESULTS,))
#: The compiled state machines' role (``StateMachineRole``): an Express machine records its
#: run's end on the run item (relayflow.compiler.recording), nothing else in the table.
STATE_MACHINE_ACCESS: tuple[TableGrant, ...] = (TableGrant("RecordRunEnds", (UPDATE,), (RUNS,)),)

#: Function folder (``functions/<name>``) → its grants in the table.
TABLE_ACCESS: dict[str, tuple[TableGrant, ...]] = {
    "condition": (_FLOW_CONTROL,),
    "transform": (_FLOW_CONTROL,),
    "tool": _TOOL,
    # An agent's tool calls run the tool step's code (and its model calls may wear a breaker),
    # so it holds the tool function's grants; its turns are recorded as step results.
    "agent": _TOOL,
    # The submission is recorded (a duplicate invocation starts no second job); not flow-
    # controlled, no breaker.
    "llm_batch": (_STEP_RESULTS,),
    "webhook_out": (_FLOW_CONTROL, _STEP_RESULTS),
    "custom": (_FLOW_CONTROL, _STEP_RESULTS),
    # The code function's role holds step results only (it runs untrusted code).
    "code": (_STEP_RESULTS,),
    "approval": (TableGrant("WaitItems", (GET, PUT, UPDATE), (WAITS,)),),
    # Waitpoints and wait_for_event registrations; a step-through gate reads its run.
    "waitpoint": (
        TableGrant("WaitItems", (GET, PUT, UPDATE), (WAITS,)),
        # A park (on_error: park) marks its run parked.
        TableGrant("ReadRuns", (GET, UPDATE), (RUNS,)),
    ),
    # The control API: everything a tenant manages, through the DAL, never a scan.
    "api": (
        TableGrant("WorkflowItems", (GET, PUT, UPDATE, QUERY), (WORKFLOWS,)),
        TableGrant("RunItems", (GET, PUT, UPDATE, DELETE), (RUNS,)),
        TableGrant("WebhookSlugs", (GET, UPDATE, DELETE), (HOOKS,)),
        TableGrant("WaitItems", (GET, UPDATE), (WAITS,)),
        TableGrant("BreakerItems", (GET, PUT, UPDATE), (BREAKERS,)),
        TableGrant("DlqEntries", (GET, PUT, UPDATE), (DLQ_ENTRIES,)),
        TableGrant("DlqRetries", (PUT, DELETE), (DLQ_DUE,)),
        TableGrant("DlqDepth", (GET, UPDATE), (DLQ_STATS,)),
        TableGrant("ApiKeyLookup", (GET,), (API_KEYS,)),
        _ADMISSION,
        _SCHEDULE_MARKS,
        _EXPRESS_START,
        _READ_STEP_RESULTS,
        TableGrant(
            "Listings",
            (QUERY,),
            (WORKFLOWS, WORKFLOW_LIST, RUNS, APPROVAL_LIST, BREAKER_LIST, DLQ_LIST, PARK_LIST),
            index=True,
        ),
    ),
    "authorizer": (TableGrant("ApiKeyLookup", (GET,), (API_KEYS,)),),
    # Status changes: the run item, the workflow breaker, the run DLQ.
    "recorder": (
        TableGrant("ReadWorkflows", (GET,), (WORKFLOWS,)),
        TableGrant("RunItems", (GET, PUT, UPDATE), (RUNS,)),
        TableGrant("BreakerItems", (GET, PUT, UPDATE), (BREAKERS,)),
        TableGrant("DlqEntries", (GET, PUT, UPDATE), (DLQ_ENTRIES,)),
        TableGrant("DlqRetries", (PUT, DELETE), (DLQ_DUE,)),
        TableGrant("DlqDepth", (GET, UPDATE), (DLQ_STATS,)),
        # A run's end frees its admission slot and starts the next queued run.
        TableGrant("AdmissionGates", (GET, PUT, UPDATE, DELETE, QUERY), (GATES,)),
        _EXPRESS_START,
    ),
    # Starts runs (schedules, events, admission deadlines), cancels runs (cancel_on) and
    # completes wait_for_event waits (read, then deleted as claimed).
    "trigger": (
        *_START_RUNS,
        _ADMISSION,
        _SCHEDULE_MARKS,
        TableGrant("EventWaits", (QUERY, DELETE), (EVENT_WAITS,)),
        TableGrant("WorkflowRunListing", (QUERY,), (WORKFLOW_RUNS,), index=True),
    ),
    # The public webhook function reads slug registrations, counts its rate windows, keeps
    # delivery answers (dedup) and starts runs; it cannot change a registration.
    "webhook": (
        TableGrant("WebhookSlugs", (GET,), (HOOKS,)),
        TableGrant(
            "WebhookWindowsAndDeliveries",
            (GET, PUT, UPDATE),
            (
                HOOK_RATE_WINDOWS,
                HOOK_SIGNATURE_FAILURES,
                HOOK_DELIVERIES,
            ),
        ),
        *_START_RUNS,
        _ADMISSION,
    ),
    # Every minute: the due automatic retries, each restarting its run; and the Express runs
    # past their deadline, settled as the recorder settles a run's end (breaker, admission).
    "maintenance": (
        TableGrant("ReadWorkflows", (GET,), (WORKFLOWS,)),
        TableGrant("RunItems", (GET, UPDATE), (RUNS,)),
        TableGrant("DlqEntries", (GET, PUT, UPDATE), (DLQ_ENTRIES,)),
        TableGrant("DlqRetries", (PUT, DELETE, QUERY), (DLQ_DUE,)),
        TableGrant("DlqDepth", (GET, UPDATE), (DLQ_STATS,)),
        TableGrant("ExpressDeadlines", (PUT, DELETE, QUERY), (EXPRESS_DUE,)),
        _READ_STEP_RESULTS,
        TableGrant("BreakerItems", (GET, PUT, UPDATE), (BREAKERS,)),
        TableGrant("AdmissionGates", (GET, PUT, UPDATE, DELETE, QUERY), (GATES,)),
    ),
    # Per-step lifecycle events: one trace per open state entry, listed once per batch, written
    # and deleted when the state exits (relayflow.dal.step_trace).
    "step_events": (TableGrant("StepTraces", (PUT, DELETE, QUERY), (STEP_TRACES,)),),
}
