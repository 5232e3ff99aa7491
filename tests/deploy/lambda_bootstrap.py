"""What Lambda's Python runtime does for one invocation, in a fresh process.

Run as ``python lambda_bootstrap.py <event.json>`` with the function's environment (from
``sam_local_env.py``) and ``PYTHONPATH=<code dir>:<layer dir>``. It imports the module named
by ``_HANDLER`` / ``AWS_LAMBDA_FUNCTION_HANDLER`` (``app.handler``) as the runtime does, calls
it with the event and a Lambda context, and prints one JSON line on the last line of stdout:
``{"result": …}`` or ``{"errorType": …, "errorMessage": …}`` (Lambda's error shape), plus the
``relayflow`` modules imported and their files, so the caller can check that no local-runtime
or CLI code ran and that the code came from the build.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import uuid
from typing import Any


class Context:
    def __init__(self, env: dict[str, str]) -> None:
        self.function_name = env.get("AWS_LAMBDA_FUNCTION_NAME", "function")
        self.function_version = env.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.memory_limit_in_mb = int(env.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
        self.log_group_name = env.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = env.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
        self.aws_request_id = str(uuid.uuid4())
        self.invoked_function_arn = (
            f"arn:aws:lambda:{env.get('AWS_REGION', 'us-east-1')}:"
            f"{env.get('AWS_ACCOUNT_ID', '123456789012')}:function:{self.function_name}"
        )
        self._deadline = time.monotonic() + int(env.get("AWS_LAMBDA_FUNCTION_TIMEOUT", "30"))

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def main() -> int:
    with open(sys.argv[1]) as handle:
        event = json.load(handle)
    spec = os.environ.get("_HANDLER") or os.environ["AWS_LAMBDA_FUNCTION_HANDLER"]
    module_name, _, function = spec.rpartition(".")
    outcome: dict[str, Any]
    try:
        handler = getattr(importlib.import_module(module_name), function)
        outcome = {"result": handler(event, Context(dict(os.environ)))}
    except Exception as exc:
        outcome = {"errorType": type(exc).__name__, "errorMessage": str(exc)}
    loaded = [m for name, m in sys.modules.items() if name.startswith("relayflow")]
    outcome["relayflowModules"] = sorted(m.__name__ for m in loaded)
    # Where they were loaded from (resolved: the layer may be a symlink), so the caller can
    # check that the built artifact ran, not the source tree.
    outcome["relayflowFiles"] = sorted(
        {os.path.realpath(m.__file__) for m in loaded if getattr(m, "__file__", None)}
    )
    sys.stdout.flush()
    print("\n" + json.dumps(outcome, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
