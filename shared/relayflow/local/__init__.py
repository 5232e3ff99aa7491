"""The local runtime: compiled Step Functions ASL run offline, in this process.

See ``docs/local-runtime.md``. moto is imported lazily (on ``LocalRuntime.__enter__``), so
importing this package costs nothing when the local runtime is not used.
"""

from relayflow.local.history import ExecutionRecord, StateRun
from relayflow.local.lambda_endpoint import Invocation, LambdaContext
from relayflow.local.runtime import ExecutionWaitTimeout, LocalRuntime

__all__ = [
    "ExecutionRecord",
    "ExecutionWaitTimeout",
    "Invocation",
    "LambdaContext",
    "LocalRuntime",
    "StateRun",
]
