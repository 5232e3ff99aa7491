"""Opening and closing runtimes: environment, sequential use, discovery of handlers.

These tests open their own runtimes, so this module uses no shared runtime fixture.
"""

from __future__ import annotations

import os
from pathlib import Path

import boto3
import pytest
from local_asl import machine, task

from relayflow.local import LocalRuntime, compat
from relayflow.settings import get_settings

pytestmark = pytest.mark.integration

ASL = machine({"Call": task("echo")})


def echo(event, context):
    return event


def test_environment_is_restored_after_exit(monkeypatch):
    # Given real-looking AWS settings in the environment
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAREAL")
    monkeypatch.setenv("AWS_PROFILE", "prod")
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://localhost:8000")
    monkeypatch.delenv("AWS_ENDPOINT_URL_LAMBDA", raising=False)
    before = dict(os.environ)

    # When a runtime is opened
    with LocalRuntime({"echo": echo}) as runtime:
        inside = dict(os.environ)
        record = runtime.run("env", ASL, {"a": 1})

    # Then inside it, clients are pointed at the mocks with fake credentials ...
    assert record.output == {"a": 1}
    assert inside["AWS_ACCESS_KEY_ID"] != "AKIAREAL"
    assert "AWS_PROFILE" not in inside
    assert "AWS_ENDPOINT_URL_DYNAMODB" not in inside
    assert inside["AWS_ENDPOINT_URL_LAMBDA"].startswith("http://127.0.0.1:")
    # ... and after it, the environment is exactly what it was
    assert dict(os.environ) == before


def test_runtimes_can_be_opened_one_after_another():
    # Given two runtimes opened in turn in one process, with different handlers
    outputs = []
    for n in range(3):
        with LocalRuntime({"echo": lambda event, context, n=n: {"runtime": n}}) as runtime:
            outputs.append(runtime.run("seq", ASL, {}).output)
            # each starts from empty moto state
            assert len(runtime.list_executions()) == 1

    # Then each served its own handler through its own endpoint
    assert outputs == [{"runtime": 0}, {"runtime": 1}, {"runtime": 2}]


def test_a_second_open_runtime_is_refused():
    # Given an open runtime
    with LocalRuntime({"echo": echo}) as runtime:
        # When another one is opened, Then it is refused (patches are process-wide)
        with pytest.raises(RuntimeError, match="another LocalRuntime is open"):
            LocalRuntime().__enter__()
        # and the first still works
        assert runtime.run("still-open", ASL, {"ok": True}).output == {"ok": True}


def test_closing_aborts_running_executions():
    # Given an execution blocked in a long Wait when the runtime closes
    with LocalRuntime({"echo": echo}) as runtime:
        arn = runtime.start_execution(
            runtime.create_state_machine(
                "close", machine({"W": {"Type": "Wait", "Seconds": 99999, "End": True}})
            ),
            {},
        )
        execution = runtime._backend().describe_execution(arn)
    # Then it was aborted rather than left running against a stopped mock
    assert execution.status == "ABORTED"


def test_clients_talk_to_the_mocks():
    # Given a runtime, When its clients and plain boto3 clients are used
    with LocalRuntime() as runtime:
        runtime.dynamodb_client.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        tables = boto3.client("dynamodb", region_name="us-east-1").list_tables()["TableNames"]
        runtime.s3_client.create_bucket(Bucket="relayflow-local-bucket")
        assert runtime.sfn_client.list_state_machines()["stateMachines"] == []

    # Then they share moto's in-process state
    # (next to the Relayflow table the runtime provisions for every function)
    assert tables == sorted(["t", get_settings().table_name])


def test_compat_refuses_another_moto_version(monkeypatch):
    # Given a moto version the compatibility layer was not written for
    import moto

    monkeypatch.setattr(moto, "__version__", "5.2.6")

    # When the layer is applied, Then it fails loudly
    with pytest.raises(compat.MotoVersionError, match=r"moto==5\.2\.5"):
        compat.apply()


def test_handlers_are_discovered_from_the_functions_directory(tmp_path: Path):
    # Given functions/<kind>/app.py with a handler, and no explicit handler for it
    app = tmp_path / "functions" / "greet" / "app.py"
    app.parent.mkdir(parents=True)
    app.write_text(
        "def handler(event, context):\n"
        "    return {'hello': event['name'], 'fn': context.function_name,\n"
        "            'remaining': context.get_remaining_time_in_millis() > 0}\n"
    )
    asl = machine({"Call": task("relayflow-greet", payload={"name": "ada"})})

    # When a Task invokes relayflow-greet
    with LocalRuntime(functions_dir=tmp_path / "functions") as runtime:
        record = runtime.run("discovery", asl, {})
        missing = runtime.run("discovery-missing", machine({"C": task("relayflow-none")}), {})

    # Then the module was loaded by path and called with a Lambda-like context
    assert record.output == {"hello": "ada", "fn": "relayflow-greet", "remaining": True}
    assert runtime.invocations[0].kind == "greet"
    # and a relayflow function without a folder is not found
    assert missing.error == "Lambda.ResourceNotFoundException"


def test_a_skipped_fix_is_left_out_and_reapplied_later():
    # Given a Choice with no match and no Default
    asl = machine(
        {
            "Route": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.n", "NumericEquals": 1, "Next": "One"}],
            },
            "One": {"Type": "Pass", "End": True},
        }
    )

    # When it runs once with its fix skipped, then in a runtime with every fix
    with LocalRuntime(compat_skip=["choice_no_match"]) as runtime:
        skipped = runtime.run("skip", asl, {"n": 2})
    with LocalRuntime() as runtime:
        fixed = runtime.run("skip", asl, {"n": 2})

    # Then moto's own error shows, and the fix is back afterwards
    assert skipped.error == "States.Runtime"
    assert fixed.error == "States.NoChoiceMatched"
    assert "choice_no_match" in compat.applied()
