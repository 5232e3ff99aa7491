"""Flow control of one step: a concurrency limit held as expiring leases, and a rate limit.

A step with ``concurrency: {limit, key}`` runs at most ``limit`` times at once per group (the
rendered ``key``; the whole step without one), across every run and version of its workflow
in its tenant. Each execution holds one of the group's ``limit`` slots (items in the table,
:mod:`relayflow.dal.flow`) while its logic runs:

* **acquire**: claim a random slot with one conditional put (free = absent or its lease ran
  out). If it is taken, read the group's slots once (a consistent Query) and try up to
  :data:`MAX_CLAIMS` of the free ones, in random order. None free: ``Relayflow.Throttled``.
* **lease**: the slot is held until the function's remaining time plus
  :data:`LEASE_MARGIN_SECONDS`. Lambda stops the function by then, so a holder that died (a
  crash, a timeout, an out-of-memory kill) frees its slot when its lease runs out.
* **release**: when the step ends, however it ends, the slot is deleted, but only while it
  still holds this execution's lease id (a slot already re-claimed stays with its new holder).

Each put is atomic on its item, so two executions never hold one slot and at most ``limit``
leases are live at any moment; nothing else (no counter, no lease list) has to agree with the
slots. A step with ``rate_limit: {limit, window_seconds, key}`` counts its starts per group in
a sliding window (:mod:`relayflow.reliability.ratelimit`): never more than ``limit`` starts in
any ``window_seconds``, however they fall. The rate is counted only once a slot is held, so a
start that is refused a slot uses none of the window.

A refused step raises ``Relayflow.Throttled``: the compiled state machine retries that error
with its own retrier, which leaves the step's retry policy untouched, and the step function's
metrics count it as ``StepThrottled``. ``docs/reliability.md`` ("Flow control") has the
operator's view.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pydantic import ValidationError

from relayflow.dal.errors import DataAccessError
from relayflow.dal.errors import Throttled as TableThrottled
from relayflow.dal.flow import FLOW_RETENTION_SECONDS, FlowDal, FlowLeaseItem
from relayflow.definition.models import Concurrency, RateLimit
from relayflow.document import config_of
from relayflow.errors import InvalidArgsError, Throttled, TransientError
from relayflow.observability import logger

#: The group of a limit without a key: every execution of the step.
WHOLE_STEP = "*"
#: A rendered key stored as it is; any other is stored as ``~`` + its sha256 (a ``~`` never
#: appears in a key kept as it is, so the two forms cannot collide).
_VERBATIM = re.compile(r"^[A-Za-z0-9_.:@-]{1,64}$")
_DIGEST_CHARS = 40
#: A lease outlives the function by this much: slack for clocks of different hosts.
LEASE_MARGIN_SECONDS = 5.0
#: Lease length when the context does not say how long the function may run (Lambda's
#: maximum timeout, so a lease never ends before its holder can).
DEFAULT_LEASE_SECONDS = 900.0
#: Free slots tried after the first one was taken, before the step is throttled.
MAX_CLAIMS = 4


def group_of(value: Any) -> str:
    """The group a rendered concurrency or rate key names, as it appears in the keys:
    the text itself when short and plain, else ``~`` and a sha256 prefix. Values other than
    strings are taken as their canonical JSON (``7`` → ``7``, ``null`` → ``null``)."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    if _VERBATIM.match(text):
        return text
    return "~" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:_DIGEST_CHARS]


@dataclass(frozen=True)
class FlowScope:
    """Whose limits: the tenant, workflow and step an execution belongs to."""

    tenant: str
    workflow_id: str
    step_key: str
    run_id: str | None = None


@dataclass(frozen=True)
class FlowLimits:
    """A step's flow-control settings, as the compiler puts them in its config."""

    concurrency: Concurrency | None = None
    rate_limit: RateLimit | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> FlowLimits:
        """The limits in a step's config; malformed ones are ``Relayflow.InvalidArgs``."""
        try:
            concurrency = config.get("concurrency")
            rate_limit = config.get("rate_limit")
            return cls(
                concurrency=Concurrency.model_validate(concurrency) if concurrency else None,
                rate_limit=RateLimit.model_validate(rate_limit) if rate_limit else None,
            )
        except ValidationError as exc:
            raise InvalidArgsError(
                f"malformed flow control: {exc.errors(include_url=False)}"
            ) from exc


def lease_seconds(context: Any) -> float:
    """How long a slot is leased: what is left of the invocation (Lambda ends it by then),
    plus :data:`LEASE_MARGIN_SECONDS`."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    seconds = DEFAULT_LEASE_SECONDS
    if callable(remaining):
        try:
            seconds = max(0.0, float(remaining()) / 1000.0)
        except (TypeError, ValueError):
            seconds = DEFAULT_LEASE_SECONDS
    return seconds + LEASE_MARGIN_SECONDS


class FlowControl:
    """Acquires and releases concurrency slots and counts rate windows.

    ``dal`` defaults to the process's :class:`FlowDal`; ``clock`` (epoch seconds) and
    ``rng`` are injectable so tests can move time and fix the slot order.
    """

    def __init__(
        self,
        dal: FlowDal | None = None,
        *,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ) -> None:
        self.dal = dal or FlowDal()
        self.clock = clock
        self.rng = rng or random.SystemRandom()

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    # -- concurrency --------------------------------------------------------------------------

    def acquire(self, scope: FlowScope, group: str, limit: int, lease_for: float) -> FlowLeaseItem:
        """Hold one of the group's ``limit`` slots for ``lease_for`` seconds; the lease (give
        it back with :meth:`release`). Raises ``Relayflow.Throttled`` when none is free."""
        now_ms = self._now_ms()
        until_ms = now_ms + math.ceil(lease_for * 1000)
        lease = FlowLeaseItem(
            tenant=scope.tenant,
            workflow_id=scope.workflow_id,
            step_key=scope.step_key,
            group=group,
            slot=self.rng.randrange(limit),
            lease_id=uuid.uuid4().hex,
            lease_until=until_ms,
            acquired_at=now_ms,
            run_id=scope.run_id,
            expires_at=math.ceil(until_ms / 1000) + FLOW_RETENTION_SECONDS,
        )
        if self._claim(lease, now_ms):
            return lease
        held = {
            item.slot: item.lease_until
            for item in self._table(
                self.dal.slot_leases, scope.tenant, scope.workflow_id, scope.step_key, group
            )
        }
        now_ms = self._now_ms()
        free = [slot for slot in range(limit) if held.get(slot, 0) <= now_ms]
        self.rng.shuffle(free)
        for slot in free[:MAX_CLAIMS]:
            candidate = lease.model_copy(update={"slot": slot})
            if self._claim(candidate, now_ms):
                return candidate
        live = [until for slot, until in held.items() if slot < limit and until > now_ms]
        retry_after = (min(live) - now_ms) / 1000.0 if live else 0.0
        raise Throttled(
            f"step {scope.step_key!r} is at its concurrency limit of {limit}"
            + ("" if group == WHOLE_STEP else f" for key {group!r}"),
            kind="concurrency",
            limit=limit,
            key=None if group == WHOLE_STEP else group,
            retry_after=round(retry_after, 3),
        )

    def _claim(self, lease: FlowLeaseItem, now_ms: int) -> bool:
        claimed, replaced = self._table(self.dal.claim_slot, lease, now_ms=now_ms)
        if replaced is not None:
            # Released slots are deleted: one still standing was held by an execution that
            # never came back (it crashed, timed out or could not reach the table).
            logger.warning(
                "flow lease ran out without a release; slot taken over",
                extra={
                    "flow_group": lease.group,
                    "slot": lease.slot,
                    "dead_run_id": replaced.run_id,
                    "lease_until": replaced.lease_until,
                },
            )
        return bool(claimed)

    def release(self, lease: FlowLeaseItem) -> bool:
        """Give the slot back; ``False`` when it no longer held this lease. Never raises: a
        slot that could not be freed is freed by its lease running out."""
        try:
            return self.dal.release_slot(lease)
        except DataAccessError as exc:
            logger.warning(
                "flow lease not released; it frees itself when it runs out",
                extra={"flow_group": lease.group, "slot": lease.slot, "reason": str(exc)},
            )
            return False

    # -- rate ---------------------------------------------------------------------------------

    def count_start(self, scope: FlowScope, group: str, limit: int, window_seconds: int) -> int:
        """Count one start in the group's sliding window; the starts in the window, this one
        included. Raises ``Relayflow.Throttled`` when the last ``window_seconds`` already
        hold ``limit`` (nothing is counted then)."""
        from relayflow.dal.flow import rate_partition
        from relayflow.reliability.ratelimit import SlidingWindowLimiter

        limiter = SlidingWindowLimiter(self.dal.rate_windows, clock=self.clock)
        pk = rate_partition(scope.tenant, scope.workflow_id, scope.step_key, group)
        admission = self._table(limiter.admit, pk, limit, window_seconds, tenant=scope.tenant)
        if not admission.admitted:
            raise Throttled(
                f"step {scope.step_key!r} reached its rate limit of {limit} per "
                f"{window_seconds} s" + ("" if group == WHOLE_STEP else f" for key {group!r}"),
                kind="rate_limit",
                limit=limit,
                window_seconds=window_seconds,
                key=None if group == WHOLE_STEP else group,
                retry_after=admission.retry_after,
            )
        return admission.count

    # -- both ---------------------------------------------------------------------------------

    @contextmanager
    def admitted(
        self, scope: FlowScope, limits: FlowLimits, doc: Mapping[str, Any], lease_for: float
    ) -> Iterator[FlowLeaseItem | None]:
        """Run the body only within the step's limits: a slot held (if it has a concurrency
        limit) and a start counted (if it has a rate limit); the slot is released however the
        body ends. Keys are rendered before any table call, so a bad key costs no write."""
        concurrency, rate = limits.concurrency, limits.rate_limit
        concurrency_group = _group(concurrency.key, doc) if concurrency else WHOLE_STEP
        rate_group = _group(rate.key, doc) if rate else WHOLE_STEP
        lease = None
        if concurrency is not None:
            lease = self.acquire(scope, concurrency_group, concurrency.limit, lease_for)
        try:
            if rate is not None:
                self.count_start(scope, rate_group, rate.limit, rate.window_seconds)
            yield lease
        finally:
            if lease is not None:
                self.release(lease)

    @staticmethod
    def _table(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A table call, its failures as step errors: DynamoDB throttling waits like a
        limit (``Relayflow.Throttled``); anything else is ``Relayflow.Transient``, since
        running the step unchecked could break the limit it exists to keep."""
        try:
            return method(*args, **kwargs)
        except TableThrottled as exc:
            raise Throttled(f"flow control: the table is throttling: {exc}") from exc
        except DataAccessError as exc:
            raise TransientError(f"flow control unavailable: {exc}") from exc
        except ValueError as exc:  # a key part the key builders refuse
            raise InvalidArgsError(f"flow control: {exc}") from exc


def _group(key: str | None, doc: Mapping[str, Any]) -> str:
    if key is None:
        return WHOLE_STEP
    from relayflow.expressions import render
    from relayflow.payloads import contains_ref, resolve_refs

    return group_of(render(key, resolve_refs(doc) if contains_ref(doc) else doc))


@lru_cache(maxsize=1)
def get_flow_control() -> FlowControl:
    """The process's flow control (its table client and name are resolved at each call)."""
    return FlowControl()


def scope_of(event: Mapping[str, Any]) -> FlowScope:
    """The tenant, workflow, step and run of a step Task payload."""
    step = event.get("step") or {}
    run = (event.get("doc") or {}).get("run") or {}
    tenant, workflow_id, step_key = run.get("tenant"), run.get("workflow_id"), step.get("key")
    for name, value in (("run.tenant", tenant), ("run.workflow_id", workflow_id)):
        if not isinstance(value, str) or not value:
            raise InvalidArgsError(f"malformed step payload: flow control needs doc.{name}")
    if not isinstance(step_key, str) or not step_key:
        raise InvalidArgsError("malformed step payload: flow control needs step.key")
    run_id = run.get("id")
    return FlowScope(tenant, workflow_id, step_key, run_id if isinstance(run_id, str) else None)


@contextmanager
def step_admission(
    event: Mapping[str, Any], context: Any, *, control: FlowControl | None = None
) -> Iterator[FlowLeaseItem | None]:
    """Admit one invocation of a flow-controlled step (see :meth:`FlowControl.admitted`)."""
    limits = FlowLimits.from_config(config_of(event.get("step")) or {})
    doc = event.get("doc")
    if not isinstance(doc, Mapping):
        raise InvalidArgsError("malformed step payload: doc must be an object")
    with (control or get_flow_control()).admitted(
        scope_of(event), limits, doc, lease_seconds(context)
    ) as lease:
        yield lease
