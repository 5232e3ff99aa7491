"""Compatibility fix: executions log to CloudWatch Logs as their state machine's logging
configuration says.

moto 5.2.5 carries a CloudWatch Logs writer over from its Step Functions parser
(``CloudWatchLoggingSession``) but never uses it: every execution is created with
``cloud_watch_logging_session=None``, and the writer itself hands moto's Logs backend a record
it cannot store (``LogEvent`` wants ``timestamp`` and ``message``), so a machine with
``loggingConfiguration`` level ``ALL`` or ``ERROR`` logs nothing. On AWS every event of the
configured level becomes one record in the log group, ``includeExecutionData: false`` keeping
inputs, outputs and causes out (:func:`relayflow.executions.history.aws_log_record` has the
shape). With this fix each execution (of a state machine, a version or an alias) gets a
session from its machine's configuration, and each record is written in AWS's shape to the
stream ``states/<state machine arn>`` of the log group (created on first use; a log group that
does not exist drops the record, as delivery to a deleted group does on AWS).

Registered through :mod:`relayflow.local.compat_registry` on import; applied in the order
:data:`relayflow.local.compat.FAMILIES` gives.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from relayflow.local.compat_registry import Patches, fix

#: moto's Logs backend appends to a stream's event list without a lock.
_WRITE_LOCK = threading.Lock()


def _session_for(state_machine: Any, execution_arn: str) -> Any | None:
    """A logging session for an execution of ``state_machine`` (a machine or a version
    snapshot), or ``None`` when its configuration logs nothing."""
    from moto.stepfunctions.parser.asl.eval.event.logging import (
        CloudWatchLoggingConfiguration,
        CloudWatchLoggingSession,
    )

    logging = getattr(state_machine, "loggingConfiguration", None)
    if not isinstance(logging, dict) or logging.get("level", "OFF") == "OFF":
        return None
    configuration = CloudWatchLoggingConfiguration.from_logging_configuration(
        state_machine_arn=":".join(str(state_machine.arn).split(":")[:7]),
        logging_configuration={"includeExecutionData": False, **logging},
    )
    if configuration is None:
        return None
    return CloudWatchLoggingSession(execution_arn=execution_arn, configuration=configuration)


def _publish(session: Any, history_log: dict[str, Any]) -> None:
    """Write one record in AWS's shape. Never fails the execution: a record that cannot be
    written is dropped with a warning, as a failed delivery is on AWS."""
    try:
        _write(session, history_log)
    except Exception as exc:
        from relayflow.observability import logger

        logger.warning("execution log record dropped", extra={"reason": repr(exc)})


def _write(session: Any, history_log: dict[str, Any]) -> None:
    from moto.logs.exceptions import ResourceNotFoundException

    from relayflow.executions.history import aws_log_record, epoch_millis

    at_ms = epoch_millis(history_log["event_timestamp"])
    record = aws_log_record(
        event_id=history_log["id"],
        event_type=str(getattr(history_log["type"], "value", history_log["type"])),
        previous_id=history_log.get("previous_event_id"),
        at_ms=at_ms,
        execution_arn=session.execution_arn,
        details=history_log.get("details"),
    )
    config = session.configuration
    event = {"timestamp": at_ms, "message": json.dumps(record, separators=(",", ":"))}
    backend = session._logs_client
    with _WRITE_LOCK:
        try:
            group = backend.groups.get(config.log_group_name)
            if group is None:
                return
            if config.log_stream_name not in group.streams:
                backend.create_log_stream(config.log_group_name, config.log_stream_name)
            backend.put_log_events(config.log_group_name, config.log_stream_name, [event])
        except ResourceNotFoundException:
            return


@fix("execution_logs", "moto: executions never log to CloudWatch Logs")
def _execution_logs(patches: Patches) -> None:
    """Executions log every event of their machine's logging level, without execution data,
    to its log group (see the module docstring)."""
    from moto.stepfunctions.parser.asl.eval.event.logging import CloudWatchLoggingSession
    from moto.stepfunctions.parser.backend.execution import Execution

    original_init = Execution.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        if self._cloud_watch_logging_session is None:
            self._cloud_watch_logging_session = _session_for(self.state_machine, self.exec_arn)

    def publish_history_log(self: Any, history_log: dict[str, Any]) -> None:
        _publish(self, history_log)

    patches.set(Execution, "__init__", __init__)
    patches.set(CloudWatchLoggingSession, "publish_history_log", publish_history_log)
