"""The EventBridge event Step Functions sends when an execution starts or ends: what the
recorder (:mod:`relayflow.control.recorder`) takes, and what the Express sweep and the
Express children of a run are rebuilt as."""

from __future__ import annotations

SOURCE = "aws.states"
DETAIL_TYPE = "Step Functions Execution Status Change"
