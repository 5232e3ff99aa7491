"""The control plane's side of steps that wait: list and decide approvals, complete or fail
waitpoints, and so resume the runs that wait for them.

Every method takes the tenant first and builds keys from it only, so another tenant's ids
raise :class:`NotFound` exactly like ids that do not exist. A decision is *claimed* in
DynamoDB first (one conditional write: of two racing responses one wins, the other gets
``409 approval_decided`` / ``waitpoint_completed``), then sent to Step Functions with the
task token stored on the item. When Step Functions no longer knows the token (the Task timed
out, or the run ended) the item becomes ``expired`` and the caller gets ``409
approval_expired`` / ``waitpoint_expired``; when the call fails for another reason the
claim is released, so the same response can be sent again. The token is never part of a
view, a message or a log line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, TypeVar

from relayflow.adapters.port import THROTTLING_CODES
from relayflow.control.errors import (
    BadRequest,
    Conflict,
    NotFound,
    ServiceUnavailable,
    TooManyRequests,
    Unprocessable,
)
from relayflow.control.limits import check_limit, check_tenant
from relayflow.control.models import (
    ApprovalView,
    Decision,
    Page,
    WaitpointView,
    shared_fields,
)
from relayflow.control.translate import translated
from relayflow.dal import Dal
from relayflow.dal.waits import ApprovalItem, WaitDal, WaitpointItem
from relayflow.executions import stepfunctions as sfn_api
from relayflow.steps.wait_outcomes import (
    TOKEN_GONE,
    WAITPOINT_FAILED,
    completion_output,
    failure_cause,
    waitpoint_id,
)

#: Approval and waitpoint ids: uuid4 hex, or (idempotent waitpoints) 32 hex of a sha256.
WAIT_ID_PATTERN = re.compile(r"^[0-9a-f]{32}$")
APPROVAL_STATUSES = ("pending", "decided", "expired")

#: An approval or a waitpoint.
_Item = TypeVar("_Item", ApprovalItem, WaitpointItem)


# ----------------------------------------------------------------------------- errors


class ApprovalDecided(Conflict):
    """409: the approval has a decision already (by whom and when is in the message)."""

    code = "approval_decided"


class ApprovalExpired(Conflict):
    """409: the approval expired (deadline passed, or its run no longer waits)."""

    code = "approval_expired"


class WaitpointCompleted(Conflict):
    """409: the waitpoint was completed or failed already."""

    code = "waitpoint_completed"


class WaitpointExpired(Conflict):
    """409: the waitpoint expired (deadline passed, or its run no longer waits)."""

    code = "waitpoint_expired"


# ----------------------------------------------------------------------------- views


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _lapsed(deadline: str | None, now: str) -> bool:
    """Both times are ISO-8601 UTC to the millisecond with ``Z``: text order is time order."""
    return deadline is not None and deadline <= now


def approval_view(item: ApprovalItem, now: str | None = None) -> ApprovalView:
    status = item.status
    if status == "pending" and _lapsed(item.deadline, now or _now()):
        status = "expired"
    return ApprovalView(
        **shared_fields(ApprovalView, item, but={"status", "expires_at", "decision"}),
        status=status,
        expires_at=item.deadline,
        decision=Decision.model_validate(item.decision) if item.decision else None,
    )


def waitpoint_view(item: WaitpointItem, now: str | None = None) -> WaitpointView:
    status = item.status
    if status == "pending" and _lapsed(item.deadline, now or _now()):
        status = "expired"
    return WaitpointView(
        **shared_fields(WaitpointView, item, but={"status", "expires_at"}),
        status=status,
        expires_at=item.deadline,
    )


# ----------------------------------------------------------------------------- service


def _found(tenant: str, kind: str, wait_id: str, get: Callable[[str, str], _Item | None]) -> _Item:
    """The tenant's approval or waitpoint (``kind``) ``wait_id``, read with ``get``;
    :class:`NotFound` when there is none or ``wait_id`` is no wait's id."""
    check_tenant(tenant)
    item = (
        get(tenant, wait_id)
        if isinstance(wait_id, str) and WAIT_ID_PATTERN.match(wait_id)
        else None
    )
    if item is None:
        raise NotFound(f"{kind} {wait_id} not found")
    return item


class TokenGone(Exception):
    """Step Functions no longer waits on the token."""


def send_task(client: Any, call: Any) -> None:
    """One SendTask* call, ``call(client)`` (approvals, waitpoints, parks): :class:`TokenGone`
    when Step Functions no longer waits on the token; throttling and other failures as API
    errors (the caller releases its claim)."""
    from botocore.exceptions import ClientError

    try:
        call(client)
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in TOKEN_GONE:
            raise TokenGone(code) from exc
        if code in THROTTLING_CODES:
            raise TooManyRequests("AWS is throttling requests; retry shortly") from exc
        from relayflow.observability import logger

        # The message may quote the token: only the code is logged.
        logger.error("SendTask call failed", extra={"error": code or type(exc).__name__})
        raise ServiceUnavailable(
            "the service could not reach Step Functions; send the same request again"
        ) from exc


class WaitService:
    """Approvals and waitpoints, scoped by tenant. ``dal`` and ``sfn`` (a boto3
    ``stepfunctions`` client) are resolved lazily when not given, as for ControlPlane."""

    def __init__(self, dal: Dal | None = None, sfn: Any | None = None) -> None:
        self.waits = WaitDal(dal)
        self.machines = sfn_api.StateMachines(sfn)

    # -- approvals ---------------------------------------------------------------------------

    @translated
    def list_approvals(
        self,
        tenant: str,
        status: str | None = "pending",
        limit: int = 20,
        next_token: str | None = None,
    ) -> Page[ApprovalView]:
        """The tenant's approvals, oldest first: by default those still waiting for a
        decision (a pending one whose deadline passed is left out)."""
        check_tenant(tenant)
        check_limit(limit)
        if status is not None and status not in APPROVAL_STATUSES:
            raise BadRequest(f"status must be one of {', '.join(APPROVAL_STATUSES)}")
        items, token = self.waits.list_approvals(
            tenant, status=status, limit=limit, next_token=next_token
        )
        now = _now()
        views = [approval_view(item, now) for item in items]
        if status == "pending":
            views = [v for v in views if v.status == "pending"]
        return Page[ApprovalView](items=views, next_token=token)

    @translated
    def get_approval(self, tenant: str, approval_id: str) -> ApprovalView:
        return approval_view(self._approval(tenant, approval_id))

    @translated
    def respond(
        self,
        tenant: str,
        approval_id: str,
        option: str,
        data: Any = None,
        *,
        responder: str,
    ) -> ApprovalView:
        """Decide the approval with ``option`` (and form ``data``) and resume its run.

        :class:`Unprocessable` for an option not offered or data its form schema refuses;
        :class:`ApprovalDecided` when it was decided already; :class:`ApprovalExpired` when
        its deadline passed or its run no longer waits."""
        item = self._approval(tenant, approval_id)
        now = _now()
        self._refuse_closed_approval(item, now)
        if option not in item.options:
            raise Unprocessable(
                f"option {option!r} is not offered; choose one of: {', '.join(item.options)}",
                {"path": "option", "options": item.options},
            )
        _check_storable(data)
        if item.form_schema:
            check_form(item.form_schema, {} if data is None else data)
        from relayflow.steps.approval import approved

        decision = {
            "option": option,
            "approved": approved(option, item.options),
            "data": data,
            "responder": responder,
            "responded_at": now,
        }
        claimed = self.waits.claim_approval(tenant, approval_id, decision, now)
        if claimed is None:
            current = self._approval(tenant, approval_id)
            self._refuse_closed_approval(current, _now())
            self.waits.expire_approval(tenant, approval_id)
            raise ApprovalExpired(f"approval {approval_id} expired before it was decided")
        output = json.dumps({**decision, "timed_out": False}, separators=(",", ":"))
        self._send_claimed(
            lambda c: c.send_task_success(taskToken=claimed.task_token, output=output),
            expire=lambda: self.waits.expire_approval(tenant, approval_id),
            expired=ApprovalExpired(
                f"approval {approval_id} expired: its run no longer waits for a decision"
            ),
            release=lambda: self.waits.release_approval(tenant, approval_id, now),
        )
        return approval_view(claimed, now)

    def _refuse_closed_approval(self, item: ApprovalItem, now: str) -> None:
        if item.status == "decided" and item.decision:
            decision = item.decision
            raise ApprovalDecided(
                f"approval {item.approval_id} was already decided: "
                f"{decision.get('option')} by {decision.get('responder')} "
                f"at {decision.get('responded_at')}",
                {
                    "option": decision.get("option"),
                    "responder": decision.get("responder"),
                    "responded_at": decision.get("responded_at"),
                },
            )
        if item.status == "expired" or (item.status == "pending" and _lapsed(item.deadline, now)):
            if item.status == "pending":
                self.waits.expire_approval(item.tenant, item.approval_id)
            raise ApprovalExpired(
                f"approval {item.approval_id} expired at {item.deadline} without a decision"
            )

    def _approval(self, tenant: str, approval_id: str) -> ApprovalItem:
        return _found(tenant, "approval", approval_id, self.waits.get_approval)

    # -- waitpoints --------------------------------------------------------------------------

    @translated
    def get_waitpoint(self, tenant: str, waitpoint_id: str) -> WaitpointView:
        return waitpoint_view(self._waitpoint(tenant, waitpoint_id))

    @translated
    def list_waitpoints(
        self, tenant: str, *, run_id: str | None = None, idempotency_key: str | None = None
    ) -> list[WaitpointView]:
        """The waitpoints of one run (oldest first), or the one an idempotency key names
        (empty when there is none): how a caller learns a waitpoint's id."""
        check_tenant(tenant)
        if (run_id is None) == (idempotency_key is None):
            raise BadRequest("pass exactly one of run_id or idempotency_key")
        now = _now()
        if idempotency_key is not None:
            item = self.waits.get_waitpoint(tenant, waitpoint_id(tenant, idempotency_key))
            return [waitpoint_view(item, now)] if item is not None else []
        assert run_id is not None
        if not re.match(r"^[A-Za-z0-9_-]{1,80}$", run_id):
            raise BadRequest("run_id is a run's id")
        return [waitpoint_view(i, now) for i in self.waits.list_run_waitpoints(tenant, run_id)]

    @translated
    def complete_waitpoint(self, tenant: str, waitpoint_id: str, data: Any = None) -> WaitpointView:
        """Complete the waitpoint: its run resumes with ``data`` as the step's output."""
        _check_storable(data)
        output = completion_output(data)
        return self._finish(
            tenant,
            waitpoint_id,
            "completed",
            result=data,
            error=None,
            send=lambda c, token: c.send_task_success(taskToken=token, output=output),
        )

    @translated
    def fail_waitpoint(
        self,
        tenant: str,
        waitpoint_id: str,
        message: str | None = None,
        error: str | None = None,
    ) -> WaitpointView:
        """Fail the waitpoint: its step fails with ``Relayflow.WaitpointFailed`` (cause: the
        message, after the caller's error code) and the run takes its failure route."""
        cause = failure_cause(error, message)
        return self._finish(
            tenant,
            waitpoint_id,
            "failed",
            result=None,
            error={"error": error or WAITPOINT_FAILED, "message": message},
            send=lambda c, token: c.send_task_failure(
                taskToken=token, error=WAITPOINT_FAILED, cause=cause
            ),
        )

    def _finish(
        self,
        tenant: str,
        waitpoint_id: str,
        status: Any,
        *,
        result: Any,
        error: dict[str, Any] | None,
        send: Any,
    ) -> WaitpointView:
        item = self._waitpoint(tenant, waitpoint_id)
        now = _now()
        self._refuse_closed_waitpoint(item, now)
        claimed = self.waits.claim_waitpoint(
            tenant, waitpoint_id, status=status, result=result, error=error, now=now
        )
        if claimed is None:
            self._refuse_closed_waitpoint(self._waitpoint(tenant, waitpoint_id), _now())
            self.waits.expire_waitpoint(tenant, waitpoint_id)
            raise WaitpointExpired(f"waitpoint {waitpoint_id} expired")
        self._send_claimed(
            lambda c: send(c, claimed.task_token),
            expire=lambda: self.waits.expire_waitpoint(tenant, waitpoint_id),
            expired=WaitpointExpired(
                f"waitpoint {waitpoint_id} expired: its run no longer waits for it"
            ),
            release=lambda: self.waits.release_waitpoint(tenant, waitpoint_id, now),
        )
        return waitpoint_view(claimed, now)

    def _refuse_closed_waitpoint(self, item: WaitpointItem, now: str) -> None:
        if item.status in ("completed", "failed"):
            raise WaitpointCompleted(
                f"waitpoint {item.waitpoint_id} was already {item.status} at {item.completed_at}",
                {"status": item.status, "completed_at": item.completed_at},
            )
        if item.status == "expired" or (item.status == "pending" and _lapsed(item.deadline, now)):
            if item.status == "pending":
                self.waits.expire_waitpoint(item.tenant, item.waitpoint_id)
            raise WaitpointExpired(f"waitpoint {item.waitpoint_id} expired at {item.deadline}")

    def _waitpoint(self, tenant: str, waitpoint_id: str) -> WaitpointItem:
        return _found(tenant, "waitpoint", waitpoint_id, self.waits.get_waitpoint)

    # -- Step Functions ----------------------------------------------------------------------

    def _send(self, call: Any) -> None:
        """One SendTask* call (:func:`send_task`)."""
        send_task(self.machines.client, call)

    def _send_claimed(
        self,
        call: Any,
        *,
        expire: Callable[[], Any],
        expired: Conflict,
        release: Callable[[], Any],
    ) -> None:
        """Send a claimed decision or completion: when Step Functions no longer waits on the
        token the item expires (``expired`` is raised); any other failure hands the claim
        back, so the same request can be sent again."""
        try:
            self._send(call)
        except TokenGone as exc:
            expire()
            raise expired from exc
        except Exception:
            release()
            raise


def _check_storable(data: Any) -> None:
    """The intake policy once more, where the data is about to be stored: callers other than
    the API (the guest page, tests, tools) must not store a value no read could serve."""
    from relayflow.intake import IntakeError, check_value

    try:
        check_value(data, "data", level=1)  # under the body's own object, as the API counts
    except IntakeError as exc:
        detail = {"path": exc.path, "rule": exc.rule, "message": exc.message}
        raise Unprocessable(f"the data cannot be stored: {exc.message}", [detail]) from None


def check_form(schema: dict[str, Any], data: Any) -> None:
    """``data`` against the approval's JSON Schema; every violation, with its path."""
    from relayflow.definition.tenant_schema import validator as schema_validator

    validator = schema_validator(schema)
    problems = [
        {
            "path": "data" + "".join(f"[{p!r}]" for p in error.absolute_path),
            "message": error.message,
        }
        for error in sorted(
            validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path]
        )
    ]
    if problems:
        raise Unprocessable(
            f"the response data does not match the form: {problems[0]['message']}", problems
        )


@lru_cache(maxsize=1)
def get_wait_service() -> WaitService:
    """The process's wait service (its clients are resolved at each call)."""
    return WaitService()
