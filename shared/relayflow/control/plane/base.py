"""The control plane's state and the lookups every resource shares."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from relayflow.control.errors import BadRequest, NotFound
from relayflow.dal import Dal, RunItem, VersionItem, WorkflowItem, get_dal
from relayflow.dal.breakers import BreakerDal
from relayflow.executions import stepfunctions as sfn_api
from relayflow.reliability.breakers import Breakers

if TYPE_CHECKING:
    from relayflow.control.admission import Admission as RunAdmission
    from relayflow.control.dlq import Dlq


from relayflow.control.plane.common import RUN_ID_PATTERN, WORKFLOW_ID_PATTERN, check_tenant


class PlaneBase:
    """State (DAL, Step Functions, breakers) and tenant-scoped lookups of the control plane."""

    def __init__(
        self, dal: Dal | None = None, sfn: Any | None = None, breakers: Breakers | None = None
    ) -> None:
        self._dal = dal
        #: The Step Functions calls (state machines, versions, alias, executions).
        self.machines = sfn_api.StateMachines(sfn)
        #: Circuit breakers (workflow breakers refuse starts; the recorder settles them).
        self.breakers = breakers or Breakers(BreakerDal(dal))

    @property
    def dal(self) -> Dal:
        return self._dal or get_dal()

    @functools.cached_property
    def admission(self) -> RunAdmission:
        """Run admission: singleton, concurrency, debounce, batch (``docs/flow-control.md``)."""
        from relayflow.control.admission import Admission as RunAdmission

        return RunAdmission(self)

    @property
    def dlq(self) -> Dlq:
        """The run dead-letter queue (:mod:`relayflow.control.dlq`)."""
        from relayflow.control.dlq import Dlq

        return Dlq(self)

    # -- lookups -----------------------------------------------------------------------------

    def _workflow(self, tenant: str, workflow_id: str) -> WorkflowItem:
        check_tenant(tenant)
        head = (
            self.dal.get_workflow(tenant, workflow_id)
            if isinstance(workflow_id, str) and WORKFLOW_ID_PATTERN.match(workflow_id)
            else None
        )
        if head is None:
            raise NotFound(f"workflow {workflow_id} not found")
        return head

    def _workflow_and_versions(
        self, tenant: str, workflow_id: str
    ) -> tuple[WorkflowItem, list[VersionItem]]:
        check_tenant(tenant)
        head, versions = (
            self.dal.get_workflow_with_versions(tenant, workflow_id)
            if isinstance(workflow_id, str) and WORKFLOW_ID_PATTERN.match(workflow_id)
            else (None, [])
        )
        if head is None:
            raise NotFound(f"workflow {workflow_id} not found")
        return head, versions

    def _version(self, tenant: str, workflow_id: str, version: int) -> VersionItem:
        if not isinstance(version, int) or isinstance(version, bool):
            raise BadRequest("a version is an integer")
        item = self.dal.get_version(tenant, workflow_id, version) if version >= 1 else None
        if item is None:
            raise NotFound(f"workflow {workflow_id} has no version {version}")
        return item

    def _run(self, tenant: str, run_id: str) -> RunItem:
        check_tenant(tenant)
        run = (
            self.dal.get_run(tenant, run_id)
            if isinstance(run_id, str) and RUN_ID_PATTERN.match(run_id)
            else None
        )
        if run is None:
            raise NotFound(f"run {run_id} not found")
        return run
