"""IAM for the compensation of cancelled and timed-out saga runs
(``relayflow.control.cancel_compensation``): the API function publishes the ``<workflow>.saga``
machine, the recorder starts and reads its executions, each within its own stage only."""

from __future__ import annotations

from sam_template import EXECUTIONS, MACHINES, allows
from stack import DEV, FUNCTIONS, TEMPLATE

from relayflow.control.cancel_compensation import EXECUTION_SUFFIX, compensation_machine_name


def statements(kind: str) -> list[dict]:
    props = TEMPLATE["Resources"][FUNCTIONS[kind]]["Properties"]
    found: list[dict] = []
    for policy in DEV.resolve(props.get("Policies") or []):
        if isinstance(policy, dict) and "Statement" in policy:
            found.extend(policy["Statement"])
    return found


def test_the_recorder_may_start_and_read_compensations_of_its_stage_only():
    granted = statements("recorder")
    dev = compensation_machine_name("dev", "acme", "orders")
    prod = compensation_machine_name("prod", "acme", "orders")
    run = f"run-1{EXECUTION_SUFFIX}"
    # Then it may start the variant's version, and read its execution's output and history
    assert allows(granted, "states:StartExecution", f"{MACHINES}{dev}:3")
    assert allows(granted, "states:DescribeExecution", f"{EXECUTIONS}{dev}:{run}")
    assert allows(granted, "states:GetExecutionHistory", f"{EXECUTIONS}{dev}:{run}")
    # And nothing of another stage
    assert not allows(granted, "states:StartExecution", f"{MACHINES}{prod}:3")
    assert not allows(granted, "states:DescribeExecution", f"{EXECUTIONS}{prod}:{run}")


def test_the_api_may_publish_the_compensation_machine_of_its_stage_only():
    granted = statements("api")
    dev = compensation_machine_name("dev", "acme", "orders")
    prod = compensation_machine_name("prod", "acme", "orders")
    for action in ("states:CreateStateMachine", "states:UpdateStateMachine", "states:TagResource"):
        assert allows(granted, action, f"{MACHINES}{dev}"), action
        assert not allows(granted, action, f"{MACHINES}{prod}"), action
