"""The control plane's errors: each has an HTTP status and a stable code, and renders as
``{"code", "message", "details"}``. The API turns them into responses as they are; anything
else is an internal error (never a stack trace)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class ApiError(Exception):
    """An error a caller can act on."""

    status: int = 500
    code: str = "internal_error"

    def __init__(
        self, message: str | None = None, details: dict[str, Any] | list[Any] | None = None
    ) -> None:
        self.message = message or self.code.replace("_", " ")
        self.details = details
        super().__init__(self.message)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


class BadRequest(ApiError):
    status, code = 400, "bad_request"


class Unauthorized(ApiError):
    status, code = 401, "unauthorized"


class Forbidden(ApiError):
    status, code = 403, "forbidden"


class NotFound(ApiError):
    """Also what another tenant's ids raise: they behave exactly like missing ids."""

    status, code = 404, "not_found"


class Conflict(ApiError):
    status, code = 409, "conflict"


class BreakerOpen(Conflict):
    """409: the workflow's circuit breaker is open; ``details`` name the breaker and when it
    lets a run through (``reopens_at``), and ``Retry-After`` says the same in seconds."""

    def __init__(self, message: str, details: dict[str, Any], retry_after: int | None) -> None:
        super().__init__(message, details)
        self.retry_after = retry_after


class PayloadTooLarge(ApiError):
    status, code = 413, "payload_too_large"


class InvalidDefinition(ApiError):
    """A workflow definition with problems; ``details`` lists every one
    (``{"file", "path", "rule", "message"}``)."""

    status, code = 422, "invalid_definition"

    @classmethod
    def from_problems(cls, problems: Iterable[Any]) -> InvalidDefinition:
        """From :class:`relayflow.definition.Problem` objects (or their dicts)."""
        details = [p.to_dict() if hasattr(p, "to_dict") else dict(p) for p in problems]
        return cls(f"the definition has {len(details)} problem(s)", details)


class Unprocessable(ApiError):
    status, code = 422, "unprocessable"


class ReservedTenant(Unprocessable):
    """422: a new tenant's id is one the platform keeps (a stage name, ``platform`` …);
    ``details`` name it and list the reserved ids."""

    code = "reserved_tenant"


class TooManyRequests(ApiError):
    status, code = 429, "too_many_requests"


class CompilerBug(ApiError):
    """The compiled state machine breaks an ASL rule or a Step Functions quota
    (:mod:`relayflow.compiler.check`): Relayflow's bug, not the caller's, so nothing was
    deployed. ``details`` lists every violation (``{"rule", "state", "message"}``)."""

    status, code = 500, "compiler_bug"

    @classmethod
    def from_violations(cls, violations: Iterable[Any]) -> CompilerBug:
        details = [{"rule": v.rule, "state": v.state, "message": v.message} for v in violations]
        return cls(
            f"the compiler produced a state machine Step Functions would refuse "
            f"({len(details)} rule(s) broken); nothing was deployed. This is a Relayflow bug: "
            "please report it with the definition",
            details,
        )


class ServiceUnavailable(ApiError):
    """An AWS service the control plane depends on failed; retrying later may work."""

    status, code = 503, "service_unavailable"
