"""Circuit breakers: a tool or a workflow that keeps failing is left alone for a while.

Two kinds, both per tenant:

* ``tool:<tool name>`` guards every call of one catalogue tool, in every workflow of the
  tenant that declares it (a tool step's ``breaker``, on by default). While it is open a call
  fails fast with ``Relayflow.CircuitOpen`` before any request leaves, and routes like any
  failure (``retry``, ``on_failure``).
* ``workflow:<workflow id>`` counts the workflow's failed runs (the workflow's ``breaker``,
  off by default). While it is open the API refuses new runs (409, with the time it reopens)
  and triggers skip theirs, recording each skip.

A breaker is ``closed`` until ``failure_threshold`` consecutive failures open it; after
``cooldown_seconds`` it is half-open: exactly one trial (a call, or a run) is let through, held
by a lease that expires so that a trial that dies never blocks the breaker. The trial's success
closes the breaker, its failure opens it for another cooldown, a verdict-less end (a transient
error) hands the trial to the next caller. Any success while closed forgets the failures.

Only failures that say something about the tool's or workflow's health count: transient
errors (timeouts, connection errors, 429 and 502-504, all ``Relayflow.Transient``), throttling,
an open breaker, and errors raised before a request leaves (bad args, an unknown tool, the
SSRF guard) neither count nor forgive.

Every transition is one conditional write (:mod:`relayflow.dal.breakers`), so concurrent
failures trip a breaker exactly once (one audit item, one ``BreakerTrips`` metric) and a
half-open breaker admits exactly one trial. Time comes from an injectable clock.
"""

from __future__ import annotations

import functools
import json
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field

from relayflow.dal.breakers import (
    SKIP_RETENTION_SECONDS,
    BreakerDal,
    BreakerItem,
    SkipItem,
    iso_time,
)
from relayflow.dal.errors import DataAccessError
from relayflow.errors import (
    CircuitOpen,
    ExpressionError,
    InvalidArgsError,
    SsrfBlocked,
    Throttled,
    ToolNotFound,
    TransientError,
)

T = TypeVar("T")
Clock = Callable[[], float]
BreakerKind = Literal["tool", "workflow"]
Outcome = Literal["success", "failure", "neutral"]

#: ``tool:<catalogue name>``, ``tool:model.<provider>`` (an agent's model) or
#: ``workflow:<workflow id>``.
BREAKER_ID_PATTERN = (
    r"^(tool:(aws|http|model)\.[a-z0-9_-]+(\.[a-z0-9_]+)?|workflow:[a-z0-9][a-z0-9_-]{0,63})$"
)
_BREAKER_ID = re.compile(BREAKER_ID_PATTERN)
#: ``relayflow.control.limits.TENANT_PATTERN`` (a run's document names its tenant).
_TENANT = re.compile(r"^[a-z0-9][a-z0-9-]{1,30}$")
#: A tool trial's lease: longer than the tool function's timeout (60 s in template.yaml), so
#: only a trial whose function died outlives it.
TOOL_TRIAL_LEASE_SECONDS = 120
#: A workflow trial's lease. A trial run that lasts longer lets another trial through; its own
#: end still decides while nobody else has taken the trial.
WORKFLOW_TRIAL_LEASE_SECONDS = 3600
#: Errors of a call that neither count as a failure nor forgive the earlier ones.
NEUTRAL_ERRORS: frozenset[str] = frozenset(
    cls.error_name
    for cls in (
        TransientError,
        Throttled,
        CircuitOpen,
        InvalidArgsError,
        ExpressionError,
        ToolNotFound,
        SsrfBlocked,
    )
)
#: Errors of a failed run that do not count against its workflow's breaker.
NEUTRAL_RUN_ERRORS: frozenset[str] = frozenset(
    {TransientError.error_name, Throttled.error_name, CircuitOpen.error_name, "Relayflow.Cancelled"}
)
#: The audit keeps this much of the error that tripped a breaker.
MAX_ERROR_CHARS = 500


# ----------------------------------------------------------------------------- ids, policy


def tool_breaker_id(tool: str) -> str:
    return f"tool:{tool}"


def workflow_breaker_id(workflow_id: str) -> str:
    return f"workflow:{workflow_id}"


def is_breaker_id(value: Any) -> bool:
    return isinstance(value, str) and _BREAKER_ID.match(value) is not None


def kind_of(breaker_id: str) -> BreakerKind:
    return "tool" if breaker_id.startswith("tool:") else "workflow"


@dataclass(frozen=True)
class BreakerPolicy:
    """A breaker's settings (``relayflow.definition.models.BreakerSettings``, read without
    building the definition models)."""

    failure_threshold: int = 5
    cooldown_seconds: int = 60

    @classmethod
    def from_config(cls, value: Any) -> BreakerPolicy | None:
        """The policy in a step config or a definition's ``breaker``; ``None`` when there is
        none (``null``, absent, not an object, or a value the definition format refuses)."""
        if not isinstance(value, Mapping):
            return None
        defaults = cls()
        threshold = value.get("failure_threshold", defaults.failure_threshold)
        cooldown = value.get("cooldown_seconds", defaults.cooldown_seconds)
        if not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 1
            for v in (
                threshold,
                cooldown,
            )
        ):
            return None
        return cls(failure_threshold=threshold, cooldown_seconds=cooldown)


def error_name(exc: BaseException) -> str:
    return str(getattr(type(exc), "error_name", None) or type(exc).__name__)


def counts_as_failure(exc: BaseException) -> bool:
    """Whether a call's exception counts against its tool's breaker (see the module)."""
    return error_name(exc) not in NEUTRAL_ERRORS


def run_outcome(status: str, error: str | None) -> Outcome:
    """A finished run's verdict for its workflow's breaker: ``succeeded`` is a success;
    ``failed`` and ``timed_out`` are failures unless their error is transient (or a breaker,
    throttling, a cancel); ``aborted`` says nothing."""
    if status == "succeeded":
        return "success"
    if status in ("failed", "timed_out") and (error or "") not in NEUTRAL_RUN_ERRORS:
        return "failure"
    return "neutral"


def run_error(status: str, error: str | None, cause: str | None) -> str:
    """``<error>: <message>`` of a failed run: the message of a step's error (Lambda's cause is
    JSON with ``errorMessage`` and a stack trace, which is left out), masked and cut."""
    from relayflow.observability import redact_text

    message = cause
    try:
        parsed = json.loads(cause) if cause else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("errorMessage"), str):
        from relayflow.errors import split_details

        message = split_details(parsed["errorMessage"])[0]  # the message, not its details
    text = f"{error or status}: {message}" if message else (error or status)
    return redact_text(text)[:MAX_ERROR_CHARS]


def describe_error(exc: BaseException) -> str:
    """``<error name>: <message>``, credentials masked, cut to :data:`MAX_ERROR_CHARS`."""
    from relayflow.observability import redact_text

    return redact_text(f"{error_name(exc)}: {exc}")[:MAX_ERROR_CHARS]


# ----------------------------------------------------------------------------- views


def effective_state(item: BreakerItem | None, now: float) -> Literal["closed", "open", "half_open"]:
    """What callers meet: an open breaker whose cooldown is over is half-open (its next caller
    takes the trial)."""
    if item is None or item.state == "closed":
        return "closed"
    if item.state == "open" and (item.reopens_at is None or now < item.reopens_at):
        return "open"
    return "half_open"


def next_chance(item: BreakerItem) -> float | None:
    """When a refused caller may be let through: the end of the cooldown, or of the running
    trial's lease."""
    if item.state == "half_open":
        return item.trial_lease_until
    return item.reopens_at


def _iso(value: float | None) -> str | None:
    return iso_time(value) if value is not None else None


class BreakerInfo(BaseModel):
    """A circuit breaker as the API shows it."""

    breaker_id: str = Field(description="tool:<tool name> or workflow:<workflow id>.")
    kind: BreakerKind
    state: Literal["closed", "open", "half_open"] = Field(
        description="closed: calls go through; open: refused until reopens_at; half_open: one "
        "trial at a time decides."
    )
    consecutive_failures: int
    failure_threshold: int | None = None
    cooldown_seconds: int | None = None
    opened_at: str | None = Field(None, description="When it last tripped.")
    reopens_at: str | None = Field(None, description="When the next trial may start.")
    trial_until: str | None = Field(None, description="The running trial's lease.")
    trips: int = Field(description="How often it has tripped.")
    last_error: str | None = None
    last_failure_at: str | None = None
    updated_at: str | None = None

    @classmethod
    def from_item(cls, item: BreakerItem, now: float) -> BreakerInfo:
        state = effective_state(item, now)
        return cls(
            breaker_id=item.breaker_id,
            kind=item.breaker_kind,
            state=state,
            consecutive_failures=item.consecutive_failures,
            failure_threshold=item.failure_threshold,
            cooldown_seconds=item.cooldown_seconds,
            opened_at=_iso(item.opened_at) if state != "closed" else None,
            reopens_at=_iso(next_chance(item)) if state != "closed" else None,
            trial_until=_iso(item.trial_lease_until) if item.state == "half_open" else None,
            trips=item.trips,
            last_error=item.last_error,
            last_failure_at=_iso(item.last_failure_at),
            updated_at=item.updated_at,
        )


@dataclass(frozen=True)
class Admission:
    """A caller let through a breaker. ``trial_token`` is set when the caller is the half-open
    trial; ``counted`` when the breaker held failures (a success must then write)."""

    tenant: str
    breaker_id: str
    trial_token: str | None = None
    counted: bool = False


# ----------------------------------------------------------------------------- the breakers


class Breakers:
    """Breaker decisions over :class:`BreakerDal`. ``clock`` returns epoch seconds
    (``time.time`` by default; tests pass their own)."""

    def __init__(self, store: BreakerDal | None = None, clock: Clock | None = None) -> None:
        self.store = store or BreakerDal()
        self.clock: Clock = clock or time.time

    # -- reads -------------------------------------------------------------------------------

    def get(self, tenant: str, breaker_id: str) -> BreakerItem | None:
        return self.store.get(tenant, breaker_id)

    def info(self, item: BreakerItem) -> BreakerInfo:
        return BreakerInfo.from_item(item, self.clock())

    def list(
        self, tenant: str, *, limit: int, next_token: str | None
    ) -> tuple[list[BreakerInfo], str | None]:
        items, token = self.store.list_breakers(tenant, limit=limit, next_token=next_token)
        now = self.clock()
        return [BreakerInfo.from_item(item, now) for item in items], token

    # -- admission ---------------------------------------------------------------------------

    def admit(
        self,
        tenant: str,
        breaker_id: str,
        *,
        lease_seconds: float,
        token: str | None = None,
        current: BreakerItem | None = None,
    ) -> Admission:
        """Let a caller through, or raise :class:`CircuitOpen` (details: ``breaker_id``,
        ``reopens_at``). A half-open breaker admits exactly one caller as its trial, holding
        it for ``lease_seconds``; ``token`` names the trial (a run id), a random one by
        default. ``current`` is the breaker as the caller just read it."""
        item = current if current is not None else self.store.get(tenant, breaker_id)
        if item is None or item.state == "closed":
            counted = item is not None and item.consecutive_failures > 0
            return Admission(tenant, breaker_id, counted=counted)
        now = self.clock()
        if effective_state(item, now) == "open" or (
            item.state == "half_open" and (item.trial_lease_until or 0) > now
        ):
            raise _circuit_open(item)
        token = token or uuid.uuid4().hex
        taken = self.store.take_trial(
            tenant, breaker_id, token=token, now=now, lease_until=now + lease_seconds
        )
        if taken is None:
            # Another caller took the trial first (or the breaker changed): read what it is now.
            latest = self.store.get(tenant, breaker_id)
            if latest is None or latest.state == "closed":
                return Admission(
                    tenant, breaker_id, counted=bool(latest and latest.consecutive_failures)
                )
            raise _circuit_open(latest)
        return Admission(tenant, breaker_id, trial_token=token, counted=True)

    # -- verdicts ----------------------------------------------------------------------------

    def succeeded(self, admission: Admission) -> None:
        """The admitted call succeeded: a trial closes the breaker, and a closed breaker
        forgets its failures (no write when it had none)."""
        if admission.trial_token is None and not admission.counted:
            return
        self.store.close(
            admission.tenant, admission.breaker_id, token=admission.trial_token, now=self.clock()
        )

    def failed(self, admission: Admission, policy: BreakerPolicy, error: str | None) -> bool:
        """The admitted call failed (in a way that counts). Whether this failure tripped it."""
        return self._fail(
            admission.tenant,
            admission.breaker_id,
            policy,
            error,
            token=admission.trial_token,
            is_trial=admission.trial_token is not None,
        )

    def abstained(self, admission: Admission) -> None:
        """The admitted call ended without a verdict: a trial hands over to the next caller."""
        if admission.trial_token is not None:
            self.store.release_trial(
                admission.tenant,
                admission.breaker_id,
                token=admission.trial_token,
                now=self.clock(),
            )

    def _fail(
        self,
        tenant: str,
        breaker_id: str,
        policy: BreakerPolicy,
        error: str | None,
        *,
        token: str | None,
        is_trial: bool,
    ) -> bool:
        now = self.clock()
        if not is_trial:
            counted = self.store.add_failure(
                tenant,
                breaker_id,
                breaker_kind=kind_of(breaker_id),
                failure_threshold=policy.failure_threshold,
                cooldown_seconds=policy.cooldown_seconds,
                error=error,
                now=now,
            )
            if counted is not None:
                if counted.consecutive_failures < policy.failure_threshold:
                    return False
                return self._trip(counted, "closed", policy, error, None, now)
            if token is None:
                return False  # open already: a call that started before it tripped
        current = self.store.get(tenant, breaker_id)
        if current is None or current.state != "half_open" or current.trial_token != token:
            return False
        return self._trip(current, "half_open", policy, error, token, now)

    def _trip(
        self,
        item: BreakerItem,
        from_state: Literal["closed", "half_open"],
        policy: BreakerPolicy,
        error: str | None,
        token: str | None,
        now: float,
    ) -> bool:
        tripped = self.store.trip(
            item,
            from_state=from_state,
            failure_threshold=policy.failure_threshold,
            cooldown_seconds=policy.cooldown_seconds,
            trial_token=token,
            error=error,
            now=now,
        )
        if tripped:
            from relayflow.observability import logger, record_metric

            logger.warning(
                "circuit breaker tripped",
                extra={
                    "breaker_id": item.breaker_id,
                    "tenant": item.tenant,
                    "from_state": from_state,
                    "failures": item.consecutive_failures,
                    "reopens_at": iso_time(now + policy.cooldown_seconds),
                    "last_error": error,
                },
            )
            record_metric("BreakerTrips", 1, BreakerKind=item.breaker_kind)
        return tripped

    # -- the tool step -----------------------------------------------------------------------

    def guard(
        self,
        tenant: str,
        breaker_id: str,
        policy: BreakerPolicy,
        call: Callable[[], T],
        *,
        lease_seconds: float = TOOL_TRIAL_LEASE_SECONDS,
    ) -> T:
        """Make ``call`` through the breaker: :class:`CircuitOpen` before it when the breaker
        is open, its outcome recorded after it. The call's result or exception passes through
        unchanged. A table that cannot be reached lets the call go ahead (logged): a breaker
        protects a dependency, and must not become one."""
        try:
            admission: Admission | None = self.admit(
                tenant, breaker_id, lease_seconds=lease_seconds
            )
        except DataAccessError as exc:
            _unavailable(breaker_id, "admit", exc)
            admission = None
        try:
            result = call()
        except Exception as exc:
            if admission is not None:
                self._settle(admission, policy, exc)
            raise
        if admission is not None:
            self._settle(admission, policy, None)
        return result

    def _settle(
        self, admission: Admission, policy: BreakerPolicy, exc: BaseException | None
    ) -> None:
        try:
            if exc is None:
                self.succeeded(admission)
            elif counts_as_failure(exc):
                self.failed(admission, policy, describe_error(exc))
            else:
                self.abstained(admission)
        except DataAccessError as error:
            _unavailable(admission.breaker_id, "record", error)

    # -- workflow runs -----------------------------------------------------------------------

    def settle_run(
        self,
        tenant: str,
        workflow_id: str,
        *,
        run_id: str,
        status: str,
        error: str | None,
        cause: str | None,
        policy: Callable[[], BreakerPolicy | None],
    ) -> bool:
        """Record a finished run on its workflow's breaker; whether it tripped it. ``policy``
        reads the workflow's breaker settings, only when a failure needs them (a run whose
        version declares none changes nothing)."""
        breaker_id = workflow_breaker_id(workflow_id)
        outcome = run_outcome(status, error)
        if outcome == "failure":
            settings = policy()
            if settings is None:
                return False
            return self._fail(
                tenant,
                breaker_id,
                settings,
                run_error(status, error, cause),
                token=run_id,
                is_trial=False,
            )
        item = self.store.get(tenant, breaker_id)
        if item is None or (item.state == "closed" and item.consecutive_failures == 0):
            return False
        held = item.state == "half_open" and item.trial_token == run_id
        if outcome == "success":
            self.store.close(tenant, breaker_id, token=run_id if held else None, now=self.clock())
        elif held:
            self.store.release_trial(tenant, breaker_id, token=run_id, now=self.clock())
        return False

    def record_skip(
        self,
        tenant: str,
        workflow_id: str,
        *,
        idempotency_key: str,
        trigger_type: str,
        reason: str,
        reopens_at: str | None,
    ) -> SkipItem:
        """Record a run a trigger did not start because the workflow's breaker is open."""
        now = self.clock()
        item = SkipItem(
            tenant=tenant,
            breaker_id=workflow_breaker_id(workflow_id),
            workflow_id=workflow_id,
            trigger_type=trigger_type,
            idempotency_key=idempotency_key,
            skipped_at=iso_time(now),
            reopens_at=reopens_at,
            reason=reason,
            expires_at=int(now) + SKIP_RETENTION_SECONDS,
        )
        self.store.put_skip(item)
        return item

    # -- operators ---------------------------------------------------------------------------

    def reset(self, tenant: str, breaker_id: str) -> BreakerInfo | None:
        """Close the breaker now; ``None`` when the tenant has no such breaker."""
        item = self.store.reset(tenant, breaker_id, now=self.clock())
        return self.info(item) if item is not None else None


def _circuit_open(item: BreakerItem) -> CircuitOpen:
    chance = next_chance(item)
    reopens_at = _iso(chance)
    trial = " (a trial is running)" if item.state == "half_open" else ""
    return CircuitOpen(
        f"circuit breaker {item.breaker_id} is open{trial}: the call was not made; "
        f"it lets a trial through at {reopens_at}",
        breaker_id=item.breaker_id,
        reopens_at=reopens_at,
        reopens_at_epoch=chance,
    )


def _unavailable(breaker_id: str, action: str, exc: Exception) -> None:
    from relayflow.observability import logger

    logger.warning(
        "circuit breaker unavailable; the call is not held back",
        extra={"breaker_id": breaker_id, "action": action, "reason": str(exc)},
    )


@functools.lru_cache(maxsize=1)
def get_breakers() -> Breakers:
    """The process's breakers (the table and client are resolved at each call)."""
    return Breakers()


def guard_tool_call(doc: Mapping[str, Any], tool: str, config: Any, call: Callable[[], T]) -> T:
    """Run a tool step's ``call`` through the tenant's ``tool:<tool>`` breaker when the step
    declares one (``config`` is its ``breaker``); otherwise just run it."""
    policy = BreakerPolicy.from_config(config)
    run = doc.get("run") if isinstance(doc, Mapping) else None
    tenant = run.get("tenant") if isinstance(run, Mapping) else None
    breaker_id = tool_breaker_id(tool)
    if policy is None or not isinstance(tenant, str) or not _TENANT.match(tenant):
        return call()
    if not is_breaker_id(breaker_id):
        return call()
    return get_breakers().guard(tenant, breaker_id, policy, call)
