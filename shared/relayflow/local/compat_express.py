"""Compatibility fix: ``StartSyncExecution`` runs an Express execution to its end.

moto 5.2.5 creates ``EXPRESS`` state machines and runs their executions like Standard ones
(``notes/moto-asl.md`` #14), but ``StartSyncExecution`` answers
``404 StartSyncExecution: Not yet implemented``. AWS starts the execution, waits for it to
end (at most the Express limit of five minutes) and answers with its end: ``status``
``SUCCEEDED``, ``FAILED`` or ``TIMED_OUT``, ``output`` on success, ``error`` and ``cause``
otherwise. It refuses a ``STANDARD`` state machine with ``StateMachineTypeNotSupported``.
With this fix the local runtime answers the same, starting the execution the way
``StartExecution`` does (versions and aliases included, through the other fixes).

Unlike AWS, the execution's history stays readable afterwards (moto keeps it); nothing in
Relayflow reads the history of an Express run (docs/engines.md).
"""

from __future__ import annotations

import json
import time
from typing import Any

from relayflow.local.compat_registry import Patches, fix

#: How often the handler looks whether the execution ended (seconds).
POLL_SECONDS = 0.01
#: The longest an Express execution runs on AWS; the local wait gives up a little later.
EXPRESS_LIMIT_SECONDS = 300


def _base_arn(arn: str) -> str:
    """The state machine of a state machine, version or alias ARN."""
    parts = arn.split(":")
    return ":".join(parts[:7])


@fix("start_sync_execution", "#14: StartSyncExecution is not implemented")
def _start_sync_execution(patches: Patches) -> None:
    """``StartSyncExecution`` on an Express state machine (or one of its versions or its
    alias) starts the execution as ``StartExecution`` does and answers once it ended, with
    AWS's response fields; on a Standard one it answers ``StateMachineTypeNotSupported``."""
    from moto.core.exceptions import AWSError
    from moto.core.responses import ActionResult
    from moto.stepfunctions.responses import StepFunctionResponse

    def start_sync_execution(self: Any) -> ActionResult:
        arn = self._get_param("stateMachineArn")
        machine = self.stepfunction_backend.describe_state_machine(_base_arn(arn))
        if getattr(machine, "type", "STANDARD") != "EXPRESS":
            raise AWSError(
                "This operation is not supported by this type of state machine",
                exception_type="StateMachineTypeNotSupported",
            )
        started = type(self).start_execution(self)
        execution_arn = started.result["executionArn"]
        deadline = time.monotonic() + EXPRESS_LIMIT_SECONDS + 5
        while True:
            execution = self.stepfunction_backend.describe_execution(execution_arn)
            status = str(getattr(execution.status, "value", execution.status))
            if status != "RUNNING" or time.monotonic() > deadline:
                break
            time.sleep(POLL_SECONDS)
        response: dict[str, Any] = {
            "executionArn": execution_arn,
            "stateMachineArn": _base_arn(arn),
            "name": execution.name,
            "startDate": execution.start_date,
            "stopDate": execution.stop_date,
            # An Express execution ends SUCCEEDED, FAILED or TIMED_OUT (a stop is a failure).
            "status": "FAILED" if status in ("ABORTED", "RUNNING") else status,
            "input": execution.execution_input,
            "inputDetails": {"included": True},
            "billingDetails": {"billedMemoryUsedInMB": 64, "billedDurationInMilliseconds": 100},
        }
        if status == "SUCCEEDED":
            output = execution.output
            response["output"] = output if isinstance(output, str) else json.dumps(output)
            response["outputDetails"] = {"included": True}
        else:
            response["error"] = getattr(execution, "error", None) or "States.Runtime"
            response["cause"] = getattr(execution, "cause", None) or ""
        return ActionResult(response)

    patches.set(StepFunctionResponse, "start_sync_execution", start_sync_execution)
    _route_sync_host(patches)


#: botocore sends StartSyncExecution to ``sync-states.<region>.amazonaws.com`` (the
#: operation's host prefix), a host moto does not serve.
_SYNC_URL_BASE = r"https?://sync-states\.(.+)\.amazonaws.com"


def _route_sync_host(patches: Patches) -> None:
    """Serve the ``sync-states`` host with the Step Functions backend."""
    import re

    from moto import backend_index
    from moto.stepfunctions import urls

    patches.set(urls, "url_bases", [*urls.url_bases, _SYNC_URL_BASE])
    patches.set(
        backend_index,
        "backend_url_patterns",
        [("stepfunctions", re.compile(_SYNC_URL_BASE)), *backend_index.backend_url_patterns],
    )
