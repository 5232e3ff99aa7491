"""Names shared by the compiler, the template and the local runtime.

A compiled state machine calls step functions by ARN. On AWS the ARNs come from the stack
(``CompileOptions.function_arns``); everywhere else they follow one predictable pattern so the
local runtime can route an Invoke to the right handler.
"""

from __future__ import annotations

#: moto's default account and the region every local run uses.
LOCAL_ACCOUNT = "123456789012"
LOCAL_REGION = "us-east-1"
FUNCTION_PREFIX = "relayflow-"

#: Step types whose work runs in a Lambda function, by function folder (functions/<name>/).
STEP_FUNCTIONS = (
    "condition",
    "transform",
    "tool",
    "webhook_out",
    "custom",
    "code",
    "approval",
    "waitpoint",
    "agent",
    "llm_batch",
)


def function_name(kind: str) -> str:
    """``condition`` → ``relayflow-condition`` (the function's name on AWS and locally)."""
    return f"{FUNCTION_PREFIX}{kind}"


def function_arn(kind: str, region: str = LOCAL_REGION, account: str = LOCAL_ACCOUNT) -> str:
    return f"arn:aws:lambda:{region}:{account}:function:{function_name(kind)}"


def kind_from_function(name_or_arn: str) -> str | None:
    """Invert :func:`function_name` for a name, a full or partial ARN, with or without a
    qualifier (``relayflow-condition:live``). Returns ``None`` for foreign functions."""
    name = name_or_arn
    if name.startswith("arn:"):
        parts = name.split(":")
        # arn:aws:lambda:region:account:function:NAME[:QUALIFIER]
        name = parts[6] if len(parts) > 6 else parts[-1]
    else:
        name = name.split(":")[0]
    if not name.startswith(FUNCTION_PREFIX):
        return None
    return name[len(FUNCTION_PREFIX) :]


def is_map_run_child(state_machine_arn: str) -> bool:
    """Whether an execution's ``stateMachineArn`` is a Distributed Map's child machine
    (``…:stateMachine:<machine>/<map run>``): its executions are the Map's items, not runs."""
    return "/" in state_machine_arn.rsplit(":", 1)[-1]
