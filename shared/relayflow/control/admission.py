"""Run admission: what a trigger does when it asks for a run (``docs/flow-control.md``).

:func:`relayflow.control.run_start.start_run` is the one door every run comes through (API,
events, webhooks, schedules), and it asks :class:`Admission` first. A workflow's rules are
read from the version the run would start on:

* ``debounce`` and ``batch`` *fold* triggers: the trigger is stored and the answer names the
  run that will start later (``pending`` / ``batched``), with a run id stable for the key. A
  one-time EventBridge Scheduler schedule (:class:`Deferrals`) delivers the deadline to the
  trigger function, which calls :func:`handle_deferred`; a full batch starts at once.
* ``singleton`` and ``concurrency`` *gate* starts: a run holds a slot of its key while it
  runs; the recorder frees it when the run ends (:meth:`Admission.release`) and hands it to
  the oldest queued run of the key, which starts then. No Lambda polls.

Every decision is a conditional write or a transaction in DynamoDB
(:mod:`relayflow.dal.admission`), so concurrent triggers never start two runs where one
may run. Keys are rendered from the trigger and stored under the tenant's prefix.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from relayflow.control.errors import ApiError, Conflict, NotFound, Unprocessable
from relayflow.control.limits import idempotent_run_id
from relayflow.control.models import StartRunResult
from relayflow.control.ports import Ports, RunControl
from relayflow.control.run_records import create_queued_run, fail_queued_run, start_queued_run
from relayflow.control.times import iso_of_epoch
from relayflow.dal.admission import AdmissionDal
from relayflow.dal.errors import DataAccessError
from relayflow.executions.stepfunctions import StepFunctionsError

if TYPE_CHECKING:
    from relayflow.dal import RunItem, WorkflowItem

#: What a deferred delivery carries as ``kind`` (the trigger function routes on it).
DEFERRED_KIND = "admission"
#: Rounds of read-and-retry a contended decision takes before it answers 409 (retry).
MAX_ROUNDS = 100
#: Reads of the run a concurrent repeat of a start is recording, with a growing pause (up to
#: 50 ms) between them, before the start tries the slot again.
AWAIT_ROUNDS = 40
#: A debounced or batched run whose start was refused (an open breaker, throttling) is tried
#: again this many seconds later.
START_RETRY_SECONDS = 60
#: Trigger types a batch collects (the others start as usual).
BATCHED_TRIGGER_TYPES = frozenset({"event", "webhook"})
#: The ``flow_key`` of a run that holds a gate slot: ``<rule>:<key id>``.
_GATE_RULES = ("singleton", "concurrency", "overlap")


@dataclass(frozen=True)
class Rules:
    """The admission rules one version declares (each ``None`` when absent)."""

    singleton: dict[str, Any] | None = None
    concurrency: dict[str, Any] | None = None
    debounce: dict[str, Any] | None = None
    batch: dict[str, Any] | None = None

    @classmethod
    def of(cls, definition: dict[str, Any]) -> Rules:
        from relayflow.definition.admission import (
            BatchSettings,
            ConcurrencySettings,
            DebounceSettings,
            SingletonSettings,
        )

        def parsed(name: str, model: Any) -> dict[str, Any] | None:
            raw = definition.get(name)
            return None if raw is None else model.model_validate(raw).model_dump()

        return cls(
            singleton=parsed("singleton", SingletonSettings),
            concurrency=parsed("concurrency", ConcurrencySettings),
            debounce=parsed("debounce", DebounceSettings),
            batch=parsed("batch", BatchSettings),
        )


@dataclass(frozen=True)
class Ask:
    """One start admission decides on: the run it would be, and how it was asked for."""

    head: WorkflowItem
    version: int
    run_id: str
    trigger: Any
    trigger_type: str
    idempotency_key: str | None = None
    step_through: bool = False


@dataclass(frozen=True)
class Decision:
    """The admission's answer: ``answer`` ends the start (folded, queued or skipped);
    otherwise the run starts, holding the gate slot named by ``flow_key`` if any."""

    answer: StartRunResult | None = None
    flow_key: str | None = None


def key_id(text: str) -> str:
    """The stored id of a rendered key (any text, even one holding ``#``)."""
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def render_key(template: str, trigger: Any, rule: str) -> str:
    """The rule's key for ``trigger``; :class:`Unprocessable` when it cannot be rendered."""
    from relayflow.errors import ExpressionError
    from relayflow.expressions.templates import render

    try:
        value = render(template, {"trigger": trigger})
    except ExpressionError as exc:
        raise Unprocessable(f"{rule}.key {template!r} could not be rendered: {exc}") from exc
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


class Deferrals:
    """Deliveries to the trigger function at a later time: one-time (``at``) EventBridge
    Scheduler schedules that delete themselves once they have fired."""

    def __init__(self, client: Any | None = None) -> None:
        self._client = client

    def defer(self, name: str, due: float, payload: dict[str, Any]) -> None:
        """Deliver ``payload`` at ``due`` (epoch seconds; Scheduler fires within the minute)."""
        from relayflow.cron import to_at_expression
        from relayflow.settings import get_settings
        from relayflow.triggers.scheduler import Schedules, ScheduleSpec

        settings = get_settings()
        moment = datetime.fromtimestamp(max(due, 0), UTC)
        spec = ScheduleSpec(
            name=name,
            expression=to_at_expression(moment, "UTC"),
            timezone="UTC",
            target_arn=settings.trigger_function_arn,
            role_arn=settings.scheduler_role_arn,
            input=json.dumps(payload, separators=(",", ":"), sort_keys=True),
            description=f"relayflow {payload.get('action')} deadline",
            delete_after_completion=True,
            # A deadline Scheduler cannot deliver waits in the trigger queue (its alarm fires;
            # relayflow ops redrive replays it) instead of leaving the debounced or batched
            # runs unstarted without a trace.
            dead_letter_arn=settings.trigger_dead_letter_queue_arn,
        )
        Schedules(settings.schedule_group_name, self._client).put(spec)


def deferral_name(*parts: str) -> str:
    """A Scheduler name (64 characters at most) unique to ``parts``."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:40]
    return f"rf-adm-{digest}"


@dataclass(frozen=True)
class RuleKey:
    """The key a rule renders for one trigger: ``kid`` (:func:`key_id`), and for a gate rule
    the ``flow_key`` a run holding one of its slots records (``<rule>:<kid>``)."""

    rule: str
    kid: str

    @property
    def flow_key(self) -> str:
        return f"{self.rule}:{self.kid}"

    @classmethod
    def of(cls, rule: dict[str, Any], trigger: Any, rule_name: str) -> RuleKey:
        return cls(rule_name, key_id(render_key(rule["key"], trigger, rule_name)))


class Admission:
    """The admission rules over ``ports``; ``runs`` starts and cancels the runs admission
    decides on itself (a singleton's cancelled holder, a debounced or batched run).
    ``clock`` gives epoch seconds (tests pass a controllable one); ``deferrals`` schedules
    the deadlines of debounce and batch."""

    def __init__(
        self,
        ports: Ports,
        runs: RunControl,
        *,
        clock: Callable[[], float] = time.time,
        deferrals: Deferrals | None = None,
    ) -> None:
        self.ports = ports
        self.runs = runs
        self.clock = clock
        self.deferrals = deferrals or Deferrals()
        self._rules: dict[tuple[str, str, int], Rules] = {}

    @property
    def store(self) -> AdmissionDal:
        return AdmissionDal(self.ports.dal)

    # -- rules -------------------------------------------------------------------------------

    def rules(self, tenant: str, workflow_id: str, version: int) -> Rules:
        """The rules ``version`` declares (versions never change, so they are cached)."""
        cache_key = (tenant, workflow_id, version)
        rules = self._rules.get(cache_key)
        if rules is None:
            item = self.ports.dal.get_version(tenant, workflow_id, version)
            rules = Rules() if item is None else _rules_of(item.definition)
            if item is not None:
                self._rules[cache_key] = rules
        return rules

    # -- the door ----------------------------------------------------------------------------

    def admit(
        self,
        head: WorkflowItem,
        version: int,
        run_id: str,
        trigger: Any,
        *,
        trigger_type: str,
        collapse: bool = True,
        overlap: tuple[str, str] | None = None,
        idempotency_key: str | None = None,
        step_through: bool = False,
    ) -> Decision:
        """Decide a start: fold it (debounce, batch), queue or skip it (concurrency,
        singleton, a schedule's ``overlap`` given as ``(mode, key)``), or let it start,
        holding a slot. A queued ``step_through`` run starts in that mode."""
        ask = Ask(head, version, run_id, trigger, trigger_type, idempotency_key, step_through)
        rules = self.rules(head.tenant, head.workflow_id, version)
        if collapse and rules.debounce is not None:
            return Decision(answer=self._debounce(ask, rules.debounce))
        if collapse and rules.batch is not None and trigger_type in BATCHED_TRIGGER_TYPES:
            return Decision(answer=self._batch(ask, rules.batch))
        if rules.singleton is not None:
            return self._singleton(ask, rules.singleton)
        if rules.concurrency is not None:
            return self._concurrency(ask, rules.concurrency)
        if overlap is not None and overlap[0] == "skip":
            # A schedule's own overlap rule: a singleton of its ticks (the workflow's
            # singleton or concurrency, when declared, governs instead).
            return self._singleton(ask, {"key": overlap[1], "mode": "skip"}, "overlap")
        if overlap is not None and overlap[0] == "buffer_one":
            rule = {"key": overlap[1], "limit": 1}
            return self._concurrency(ask, rule, "overlap", max_queued=1)
        return Decision()

    def abandon(self, tenant: str, workflow_id: str, run_id: str, flow_key: str | None) -> None:
        """A run that held a slot never started: free the slot (and pass it on)."""
        if flow_key is not None:
            self._release(tenant, workflow_id, run_id, flow_key)

    # -- gates -------------------------------------------------------------------------------

    def _singleton(self, ask: Ask, rule: dict[str, Any], rule_name: str = "singleton") -> Decision:
        tenant, workflow_id, run_id = ask.head.tenant, ask.head.workflow_id, ask.run_id
        slot = RuleKey.of(rule, ask.trigger, rule_name)
        kid, flow_key = slot.kid, slot.flow_key
        for _ in range(20):
            now = int(self.clock())
            if self.store.take_slot(tenant, workflow_id, kid, run_id, limit=1, now=now):
                return Decision(flow_key=flow_key)
            holders = self.store.holders(tenant, workflow_id, kid)
            if not holders:
                continue  # freed meanwhile
            if holders[0] == run_id:
                # A concurrent repeat of this start (same key, same run id) holds the slot:
                # its run is this one. Never skip or cancel it; answer it once it exists.
                repeat = self._await_run(tenant, run_id)
                if repeat is not None:
                    return Decision(answer=_answer(repeat, admission=None, created=False))
                continue  # the repeat gave the slot up: try again
            running = self.ports.dal.get_run(tenant, holders[0])
            if running is None:
                # The holder took the slot and records its run next (a start racing this
                # one): wait for it, as for a repeat, rather than cancel a run not there yet.
                running = self._await_run(tenant, holders[0])
                if running is None:
                    continue  # it gave the slot up without a run
            if running.status not in ("running", "parked"):
                # Its end was recorded but the slot was never freed (a lost status change).
                self._release(tenant, workflow_id, running.run_id, flow_key)
                continue
            if rule["mode"] == "skip":
                return Decision(answer=_answer(running, admission="skipped", created=False))
            with contextlib.suppress(Conflict, NotFound):  # it ended (or went) meanwhile
                self.runs.cancel_run(tenant, holders[0])
            if self.store.hand_over(tenant, workflow_id, kid, holders[0], run_id, now=now):
                return Decision(flow_key=flow_key)
        raise _contended(rule_name, workflow_id)

    def _await_run(self, tenant: str, run_id: str) -> RunItem | None:
        """The run a concurrent repeat of this start is recording (it holds the slot and
        writes the run next); ``None`` when it did not appear (the repeat gave up)."""
        for attempt in range(AWAIT_ROUNDS):
            run = self.ports.dal.get_run(tenant, run_id)
            if run is not None:
                return run
            time.sleep(min(0.05, 0.001 * 2**attempt))
        return None

    def _concurrency(
        self,
        ask: Ask,
        rule: dict[str, Any],
        rule_name: str = "concurrency",
        max_queued: int | None = None,
    ) -> Decision:
        head, run_id = ask.head, ask.run_id
        tenant, workflow_id = head.tenant, head.workflow_id
        slot = RuleKey.of(rule, ask.trigger, rule_name)
        kid, flow_key = slot.kid, slot.flow_key
        limit = int(rule["limit"])
        queued: RunItem | None = None
        for _ in range(MAX_ROUNDS):
            now_s = self.clock()
            if self.store.take_slot(tenant, workflow_id, kid, run_id, limit=limit, now=int(now_s)):
                if queued is not None:
                    # Queued a moment ago, then a slot freed before the queue entry was written.
                    self._start_queued(queued)
                    started = self.ports.dal.get_run(tenant, run_id) or queued
                    return Decision(answer=_answer(started, admission=None, created=True))
                return Decision(flow_key=flow_key)
            if queued is None:
                queued, created = create_queued_run(
                    self.ports.dal,
                    head,
                    run_id,
                    ask.trigger,
                    ask.version,
                    ask.trigger_type,
                    flow_key,
                    ask.idempotency_key,
                    step_through=ask.step_through,
                )
                if not created:
                    # A concurrent repeat of the same key recorded it: that request queues it.
                    return Decision(answer=_answer(queued, admission=None, created=False))
            if self.store.enqueue(
                tenant,
                workflow_id,
                kid,
                run_id,
                limit=limit,
                now_ms=int(now_s * 1000),
                max_queued=max_queued,
            ):
                return Decision(answer=_answer(queued, admission="queued", created=True))
            if max_queued is not None:
                gate = self.store.gate(tenant, workflow_id, kid)
                if int(gate["queued"]) >= max_queued:
                    # The buffer is taken: this one is skipped, naming the running run.
                    self.ports.dal.delete_run(tenant, run_id)
                    holders = self.store.holders(tenant, workflow_id, kid)
                    running = self.ports.dal.get_run(tenant, holders[0]) if holders else None
                    return Decision(
                        answer=_answer(running or queued, admission="skipped", created=False)
                    )
        raise _contended(rule_name, workflow_id)

    def release(self, run: RunItem) -> None:
        """The run ended: free the slot it held, handing it to its key's oldest queued run
        (which starts). Repeats are harmless: a slot is freed once."""
        if run.flow_key is not None and run.flow_key.split(":", 1)[0] in _GATE_RULES:
            self._release(run.tenant, run.workflow_id, run.run_id, run.flow_key)

    def _release(self, tenant: str, workflow_id: str, run_id: str, flow_key: str) -> None:
        kid = flow_key.split(":", 1)[1]
        ending = run_id
        while True:
            freed, successor = self.store.release(
                tenant, workflow_id, kid, ending, now=int(self.clock())
            )
            if not freed or successor is None:
                return
            queued = self.ports.dal.get_run(tenant, successor)
            if queued is not None and queued.status == "queued":
                try:
                    self._start_queued(queued)
                    return
                except Exception as exc:
                    fail_queued_run(self.ports.dal, queued, f"could not start: {exc}")
            # The successor cannot run: its slot passes on to the next in line.
            ending = successor

    def _start_queued(self, run: RunItem) -> None:
        start_queued_run(self.ports, run)

    def cancel_queued(self, run: RunItem) -> bool:
        """Take a queued run out of its queue (it is being cancelled)."""
        if run.flow_key is None:
            return False
        kid = run.flow_key.split(":", 1)[1]
        return self.store.drop_queued(run.tenant, run.workflow_id, kid, run.run_id)

    # -- debounce ----------------------------------------------------------------------------

    def _debounce(self, ask: Ask, rule: dict[str, Any]) -> StartRunResult:
        head, version, trigger, trigger_type = ask.head, ask.version, ask.trigger, ask.trigger_type
        tenant, workflow_id = head.tenant, head.workflow_id
        kid = RuleKey.of(rule, trigger, "debounce").kid
        period, max_wait = int(rule["period"]), rule.get("max_wait")
        trigger_json = json.dumps(trigger, separators=(",", ":"))
        for _ in range(MAX_ROUNDS):
            now = self.clock()
            pending = self.store.pending(tenant, workflow_id, kid)
            if pending is None:
                generation = uuid.uuid4().hex
                due = now + period
                values = {
                    "generation": generation,
                    "first_at": now,
                    "due_at": due,
                    "deadline": now + max_wait if max_wait else None,
                    "trigger": trigger_json,
                    "trigger_type": trigger_type,
                    "expires_at": int(now) + 86_400 * 8,
                }
                if not self.store.open_pending(tenant, workflow_id, kid, values):
                    continue
                self._defer_debounce(tenant, workflow_id, kid, generation, due)
                created = True
            else:
                generation = str(pending["generation"])
                due = now + period
                if pending.get("deadline") is not None:
                    due = min(due, float(pending["deadline"]))
                values = {"due_at": due, "trigger": trigger_json, "trigger_type": trigger_type}
                if not self.store.push_pending(tenant, workflow_id, kid, generation, values):
                    continue
                created = False
            run_id = idempotent_run_id(tenant, workflow_id, f"debounce:{kid}:{generation}")
            first = now if pending is None else float(pending["first_at"])
            return StartRunResult(
                run_id=run_id,
                workflow_id=workflow_id,
                version=version,
                status="pending",
                started_at=iso_of_epoch(first),
                created=created,
                admission="debounced",
                starts_at=iso_of_epoch(due),
            )
        raise _contended("debounce", workflow_id)

    def _defer_debounce(
        self, tenant: str, workflow_id: str, kid: str, generation: str, due: float
    ) -> None:
        payload = {
            "kind": DEFERRED_KIND,
            "action": "debounce",
            "tenant": tenant,
            "workflow_id": workflow_id,
            "key_id": kid,
            "generation": generation,
        }
        name = deferral_name(tenant, workflow_id, kid, generation, str(int(due)))
        self.deferrals.defer(name, due, payload)

    def flush_debounce(
        self, tenant: str, workflow_id: str, kid: str, generation: str
    ) -> dict[str, Any]:
        """A debounce deadline arrived: start the pending run if the key has been quiet for
        its period (or its ``max_wait`` ran out); otherwise schedule the later deadline."""
        for _ in range(MAX_ROUNDS):
            pending = self.store.pending(tenant, workflow_id, kid)
            if pending is None or pending["generation"] != generation:
                return {"status": "gone"}
            due = float(pending["due_at"])
            if self.clock() < due:
                self._defer_debounce(tenant, workflow_id, kid, generation, due)
                return {"status": "deferred", "due_at": iso_of_epoch(due)}
            if self.store.close_pending(tenant, workflow_id, kid, generation, int(pending["seq"])):
                break
        else:
            raise _contended("debounce", workflow_id)
        trigger = json.loads(pending["trigger"])
        try:
            started = self.runs.start_run(
                tenant,
                workflow_id,
                trigger,
                idempotency_key=f"debounce:{kid}:{generation}",
                trigger_type=str(pending.get("trigger_type") or "api"),
                collapse=False,
            )
        except (ApiError, DataAccessError, StepFunctionsError) as exc:
            # Put the trigger back (unless a newer one has opened the key again) and try
            # again later: a breaker that is open now, or a throttled service, passes.
            values = {
                k: v for k, v in pending.items() if k not in ("pk", "sk", "type", "tenant", "seq")
            }
            if self.store.open_pending(tenant, workflow_id, kid, values):
                retry_at = self.clock() + START_RETRY_SECONDS
                self._defer_debounce(tenant, workflow_id, kid, generation, retry_at)
            return _retrying("debounce", workflow_id, exc)
        return {"status": "started", "run_id": started.run_id}

    # -- batches -----------------------------------------------------------------------------

    def _batch(self, ask: Ask, rule: dict[str, Any]) -> StartRunResult:
        """Add the trigger to its key's open batch. A trigger with an ``idempotency_key``
        (an event id, a webhook delivery id) joins one batch once: a repeat, even one racing
        the first, is answered with the batch it joined."""
        head, version, trigger, idempotency_key = (
            ask.head,
            ask.version,
            ask.trigger,
            ask.idempotency_key,
        )
        tenant, workflow_id = head.tenant, head.workflow_id
        kid = RuleKey.of(rule, trigger, "batch").kid
        max_size, timeout = int(rule["max_size"]), int(rule["timeout"])
        member = key_id(idempotency_key) if idempotency_key is not None else None
        for _ in range(MAX_ROUNDS):
            now = self.clock()
            seen = self.store.open_batch(tenant, workflow_id, kid)
            added = self.store.add_to_batch(
                tenant,
                workflow_id,
                kid,
                seen=seen,
                new_batch_id=uuid.uuid4().hex,
                max_size=max_size,
                trigger=trigger,
                entry_sk=f"{int(now * 1000):013d}#{uuid.uuid4().hex}",
                now=int(now),
                member=member,
            )
            if added is not None:
                break
            joined = (
                None
                if member is None
                else self.store.batch_member(tenant, workflow_id, kid, member)
            )
            if joined is not None:
                return self._batch_repeat(head, version, kid, joined, now, max_size)
        else:
            raise _contended("batch", workflow_id)
        batch_id, count = added
        if count == 1 and max_size > 1:
            payload = _batch_deadline(tenant, workflow_id, kid, batch_id)
            self.deferrals.defer(
                deferral_name(tenant, workflow_id, kid, batch_id), now + timeout, payload
            )
        if count >= max_size:
            self._start_batch(tenant, workflow_id, kid, batch_id)
        return _batch_answer(
            head,
            version,
            batch_id,
            pending=count < max_size,
            now=now,
            created=count == 1,
            size=count,
        )

    def _batch_repeat(
        self,
        head: WorkflowItem,
        version: int,
        kid: str,
        joined: dict[str, Any],
        now: float,
        max_size: int,
    ) -> StartRunResult:
        """The answer to a trigger that joined batch ``joined["batch_id"]`` already."""
        tenant, workflow_id = head.tenant, head.workflow_id
        batch_id = str(joined["batch_id"])
        current = self.store.open_batch(tenant, workflow_id, kid)
        still_open = (
            current is not None
            and current.get("batch_id") == batch_id
            and int(current["count"]) < max_size
        )
        size = (
            int(current["count"]) if current is not None and still_open else int(joined["position"])
        )
        return _batch_answer(
            head, version, batch_id, pending=still_open, now=now, created=False, size=size
        )

    def flush_batch(self, tenant: str, workflow_id: str, kid: str, batch_id: str) -> dict[str, Any]:
        """A batch's timeout ran out: close it to new triggers and start its run (a batch
        that filled up has started already; its run id makes this a repeat)."""
        self.store.seal_batch(tenant, workflow_id, kid, batch_id)
        try:
            started = self._start_batch(tenant, workflow_id, kid, batch_id)
        except (ApiError, DataAccessError, StepFunctionsError) as exc:
            # The batch keeps its triggers: try again later (an open breaker passes).
            retry_at = self.clock() + START_RETRY_SECONDS
            payload = _batch_deadline(tenant, workflow_id, kid, batch_id)
            self.deferrals.defer(
                deferral_name(tenant, workflow_id, kid, batch_id, str(int(retry_at))),
                retry_at,
                payload,
            )
            return _retrying("batch", workflow_id, exc)
        return {"status": "started", "run_id": started.run_id}

    def _start_batch(
        self, tenant: str, workflow_id: str, kid: str, batch_id: str
    ) -> StartRunResult:
        triggers = self.store.batch_triggers(tenant, workflow_id, kid, batch_id)
        return self.runs.start_run(
            tenant,
            workflow_id,
            triggers,
            idempotency_key=f"batch:{batch_id}",
            trigger_type="batch",
            collapse=False,
        )


def _batch_answer(
    head: WorkflowItem,
    version: int,
    batch_id: str,
    *,
    pending: bool,
    now: float,
    created: bool,
    size: int,
) -> StartRunResult:
    """The answer to a trigger a batch holds: the batch's run (``pending`` while the batch is
    open), with the number of triggers it holds."""
    return StartRunResult(
        run_id=idempotent_run_id(head.tenant, head.workflow_id, f"batch:{batch_id}"),
        workflow_id=head.workflow_id,
        version=version,
        status="pending" if pending else "running",
        started_at=iso_of_epoch(now),
        created=created,
        admission="batched",
        batch_size=size,
    )


def _batch_deadline(tenant: str, workflow_id: str, kid: str, batch_id: str) -> dict[str, Any]:
    return {
        "kind": DEFERRED_KIND,
        "action": "batch",
        "tenant": tenant,
        "workflow_id": workflow_id,
        "key_id": kid,
        "batch_id": batch_id,
    }


def _retrying(rule: str, workflow_id: str, exc: Exception) -> dict[str, Any]:
    from relayflow.observability import logger

    reason = getattr(exc, "message", None) or str(exc)
    logger.warning(
        f"the {rule} run could not start; it is tried again later",
        extra={"workflow_id": workflow_id, "reason": reason},
    )
    return {"status": "retrying", "reason": reason}


def _contended(rule: str, workflow_id: str) -> Conflict:
    """409: the key changed under every one of :data:`MAX_ROUNDS` attempts."""
    return Conflict(f"the {rule} key of workflow {workflow_id} is contended; retry")


#: What the answer to a start tells of the run admission started, found or let wait.
_ANSWERED = frozenset({"run_id", "workflow_id", "version", "status", "started_at", "engine"})


def _answer(run: RunItem, *, admission: str | None, created: bool) -> StartRunResult:
    fields = run.model_dump(include=set(_ANSWERED))
    return StartRunResult(**fields, created=created, admission=admission)


@lru_cache(maxsize=512)
def _rules_of(definition: str) -> Rules:
    return Rules.of(json.loads(definition))


class AdmissionOwner(Protocol):
    """What holds the run admission (the control plane)."""

    @property
    def admission(self) -> Admission: ...


def handle_deferred(event: dict[str, Any], *, control: AdmissionOwner) -> dict[str, Any]:
    """What the trigger function does with a deferred delivery (debounce or batch deadline)."""
    plane = control
    tenant, workflow_id, kid = event["tenant"], event["workflow_id"], event["key_id"]
    if event.get("action") == "debounce":
        return plane.admission.flush_debounce(tenant, workflow_id, kid, event["generation"])
    if event.get("action") == "batch":
        return plane.admission.flush_batch(tenant, workflow_id, kid, event["batch_id"])
    raise ValueError(f"unknown deferred action {event.get('action')!r}")
