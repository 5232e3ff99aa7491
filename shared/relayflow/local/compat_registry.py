"""The registry of the compatibility fixes over moto (:mod:`relayflow.local.compat`), and the
helpers the fixes share.

A fix is a function that patches moto through a :class:`Patches`, registered with the
:func:`fix` decorator by the module of its finding family. This module imports no family:
the composition point :mod:`relayflow.local.compat` imports every family (so each registers
its fixes) and applies them in its order.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_MISSING = object()


class Patches:
    """Attribute replacements of one fix, kept so the fix can be reverted."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []

    def set(self, owner: Any, attr: str, value: Any) -> None:
        self._saved.append((owner, attr, owner.__dict__.get(attr, _MISSING)))
        setattr(owner, attr, value)

    def set_everywhere(self, package: str, attr: str, original: Any, value: Any) -> None:
        """Replace ``attr`` in every loaded module of ``package`` that imported ``original``."""
        import sys

        for name, module in list(sys.modules.items()):
            if (
                module is not None
                and name.startswith(package)
                and getattr(module, attr, None) is original
            ):
                self.set(module, attr, value)

    def revert(self) -> None:
        for owner, attr, original in reversed(self._saved):
            if original is _MISSING:
                delattr(owner, attr)
            else:
                setattr(owner, attr, original)
        self._saved.clear()


@dataclass(frozen=True)
class Fix:
    """One compatibility fix: the finding it addresses and the function that applies it."""

    name: str
    finding: str
    install: Callable[[Patches], None]
    infrastructure: bool = False


_REGISTERED: dict[str, Fix] = {}


def fix(name: str, finding: str, *, infrastructure: bool = False) -> Callable[..., Any]:
    """Register the decorated function as the fix ``name`` (its module is its family)."""

    def register(install: Callable[[Patches], None]) -> Callable[[Patches], None]:
        _REGISTERED[name] = Fix(name, finding, install, infrastructure)
        return install

    return register


def registered() -> list[Fix]:
    """Every fix registered so far, in the order the families' modules defined them."""
    return list(_REGISTERED.values())


def history_page(request: Any, events: list[Any]) -> Any:
    """One ``GetExecutionHistory`` answer over ``events`` (oldest first), as the request's
    ``reverseOrder``, ``maxResults`` (default 100, at most 1000) and ``nextToken`` ask."""
    from moto.core.responses import ActionResult

    if request._get_param("reverseOrder"):
        events = list(reversed(events))
    size = min(int(request._get_param("maxResults") or 100), 1000)
    token = request._get_param("nextToken")
    try:
        start = int(token) if token else 0
    except ValueError as exc:
        raise aws_error("InvalidToken", f"Invalid Token: '{token}'") from exc
    response: dict[str, Any] = {"events": events[start : start + size]}
    if start + size < len(events):
        response["nextToken"] = str(start + size)
    return ActionResult(response)


def runtime_error(env: Any, cause: str, error: str = "States.Runtime") -> Exception:
    """A failure named ``error`` (a ``States.*`` name) that the interpreter handles like its
    own: Retry and Catch match it, and the execution reports it."""
    from moto.stepfunctions.parser.api import HistoryEventType, TaskFailedEventDetails
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
        FailureEvent,
        FailureEventException,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import (
        StatesErrorName,
    )
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

    return FailureEventException(
        failure_event=FailureEvent(
            env=env,
            error_name=StatesErrorName.from_name(error),
            event_type=HistoryEventType.TaskFailed,
            event_details=EventDetails(
                taskFailedEventDetails=TaskFailedEventDetails(error=error, cause=cause)
            ),
        )
    )


def aws_error(code: str, message: str) -> Exception:
    """A Step Functions error that reaches the boto3 caller as ``ClientError(code)``."""
    from moto.core.exceptions import AWSError

    return AWSError(message, exception_type=code)


def iso_timestamp(value: datetime.datetime) -> str:
    """``2026-11-05T10:00:00.123Z``: the form Step Functions uses for context timestamps."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    utc = value.astimezone(datetime.UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
