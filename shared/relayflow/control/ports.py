"""What the control plane's use cases work with: its ports (the table, Step Functions, the
circuit breakers) and, for the use cases that start or cancel runs themselves (admission,
reruns, ``cancel_on``), the run operations as a :class:`RunControl` protocol.

The composition root (:mod:`relayflow.control.service`) builds one :class:`Ports` and hands
it to every use case; nothing here knows the root.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from relayflow.dal import Dal, get_dal
from relayflow.dal.breakers import BreakerDal
from relayflow.executions import stepfunctions as sfn_api
from relayflow.reliability.breakers import Breakers

if TYPE_CHECKING:
    from relayflow.control.models import RunSummary, StartRunResult


@dataclass(frozen=True)
class Ports:
    """The control plane's collaborators. ``dal`` is resolved at each use when none was
    given (:func:`relayflow.dal.get_dal`), as the API's process-wide plane needs."""

    #: The Step Functions calls (state machines, versions, alias, executions).
    machines: sfn_api.StateMachines
    #: Circuit breakers (workflow breakers refuse starts; the recorder settles them).
    breakers: Breakers
    #: The DAL given at construction, if any (``None``: :func:`get_dal` at each use).
    given_dal: Dal | None = None

    @classmethod
    def of(
        cls, dal: Dal | None = None, sfn: Any | None = None, breakers: Breakers | None = None
    ) -> Ports:
        """Ports over ``dal`` and ``sfn`` (a boto3 ``stepfunctions`` client; created lazily
        when not given)."""
        return cls(
            machines=sfn_api.StateMachines(sfn),
            breakers=breakers or Breakers(BreakerDal(dal)),
            given_dal=dal,
        )

    @property
    def dal(self) -> Dal:
        return self.given_dal or get_dal()


class HasDal(Protocol):
    """Anything that reaches the table (:class:`Ports`, the control plane)."""

    @property
    def dal(self) -> Dal: ...


class RunControl(Protocol):
    """Starting and cancelling runs, for the use cases that do so on their own
    (:mod:`relayflow.control.admission`, :mod:`relayflow.control.rerun`,
    :mod:`relayflow.control.cancel_on`); the control plane is one."""

    @property
    def dal(self) -> Dal: ...

    def start_run(
        self, tenant: str, workflow_id: str, input: Any, **options: Any
    ) -> StartRunResult:
        """Start a run; ``options`` are those of :func:`relayflow.control.run_start.start_run`
        (``version``, ``idempotency_key``, ``trigger_type``, ``collapse``, ``rerun``, …)."""
        ...

    def cancel_run(self, tenant: str, run_id: str) -> RunSummary: ...
