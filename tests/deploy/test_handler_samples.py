"""Every deployed function, invoked with every one of its events/<function>/*.json samples.

This is what `sam local invoke <Function> -e events/<function>/<sample>.json` does, without
Docker: load functions/<function>/app.py by path, call ``handler(event, context)`` with
Lambda's environment, AWS answered by moto and no route to the internet. A handler must
return a JSON step result or raise a named ``Relayflow.*`` error (what ASL Retry/Catch match);
anything else would reach Step Functions as an unplanned ``States.TaskFailed``. And each
invocation writes exactly one metrics line, under the names the dashboard draws.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from relayflow_testing import lambda_context, load_handler
from sam_template import ROOT, function_resources, load_template

from relayflow import naming
from relayflow.adapters.aws import client, reset_clients
from relayflow.errors import RelayflowError

FUNCTIONS = sorted(function_resources(load_template()))
#: Functions a compiled state machine calls with a step Task payload.
STEP_FUNCTIONS = sorted(set(FUNCTIONS) & set(naming.STEP_FUNCTIONS))
#: The control plane's functions: API Gateway, authorizer and EventBridge events.
PLATFORM_FUNCTIONS = sorted(set(FUNCTIONS) - set(naming.STEP_FUNCTIONS))


def samples(kinds: list[str]) -> list[tuple[str, Path]]:
    return [(k, s) for k in kinds for s in sorted((ROOT / "events" / k).glob("*.json"))]


SAMPLES = samples(STEP_FUNCTIONS)
PLATFORM_SAMPLES = samples(PLATFORM_FUNCTIONS)


@pytest.mark.parametrize("kind", FUNCTIONS)
def test_each_function_has_a_handler_and_at_least_one_sample(kind):
    assert callable(load_handler(kind).handler)
    assert list((ROOT / "events" / kind).glob("*.json")), f"events/{kind}/ has no sample"


@pytest.fixture
def lambda_sandbox(monkeypatch: pytest.MonkeyPatch):
    """Lambda's environment variables, fake credentials, moto for AWS, no internet."""
    from moto import mock_aws

    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    for name in list(__import__("os").environ):
        if name.startswith("AWS_ENDPOINT_URL_"):
            monkeypatch.delenv(name)
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "POWERTOOLS_METRICS_NAMESPACE": "Relayflow",
    }.items():
        monkeypatch.setenv(name, value)

    real_getaddrinfo = socket.getaddrinfo

    def loopback_only(host: Any, *args: Any, **kwargs: Any) -> Any:
        text = host.decode() if isinstance(host, bytes) else str(host)
        try:
            loopback = ipaddress.ip_address(text).is_loopback
        except ValueError:
            loopback = text == "localhost"
        if not loopback:
            raise socket.gaierror(socket.EAI_NONAME, f"no network in this test: {text}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", loopback_only)
    reset_clients()
    try:
        from relayflow.tools.secrets import clear_secret_cache
    except ImportError:  # pragma: no cover - only while the tools package is absent

        def clear_secret_cache() -> None:
            return None

    clear_secret_cache()
    with mock_aws():
        yield monkeypatch
    reset_clients()
    clear_secret_cache()


@pytest.mark.parametrize(("kind", "sample"), SAMPLES, ids=[f"{k}/{s.stem}" for k, s in SAMPLES])
def test_the_handler_answers_each_sample_like_lambda_would(
    kind, sample: Path, lambda_sandbox, capsys
):
    # Given the function's handler, loaded as the Lambda runtime loads it, one sample, and the
    # stack's table (side-effecting steps record their results in it)
    from relayflow.dal import create_table

    lambda_sandbox.setenv("AWS_LAMBDA_FUNCTION_NAME", f"relayflow-dev-{kind}")
    create_table(client("dynamodb"))
    handler = load_handler(kind).handler
    event = json.loads(sample.read_text())
    context = SimpleNamespace(
        function_name=f"relayflow-dev-{kind}",
        aws_request_id="sam-local-invoke",
        invoked_function_arn=f"arn:aws:lambda:us-east-1:123456789012:function:relayflow-dev-{kind}",
        get_remaining_time_in_millis=lambda: 30_000,
    )
    # When it is invoked
    error: BaseException | None = None
    try:
        result = handler(event, context)
    except Exception as exc:  # the assertions below say which exceptions are allowed
        error = exc
    # Then it returned a JSON step result, or raised a named Relayflow error
    if error is None:
        assert isinstance(result, dict) and "output" in result, result
        json.dumps(result)
    else:
        assert isinstance(error, RelayflowError), f"unnamed {type(error).__name__}: {error}"
        assert type(error).__name__.startswith("Relayflow."), type(error).__name__
    # And it wrote one metrics line for its step type, with the run it served
    out = capsys.readouterr().out.splitlines()
    lines = [json.loads(line) for line in out if '"_aws"' in line]
    assert len(lines) == 1, lines
    (metrics,) = lines
    assert metrics["StepType"] == (event.get("step") or {}).get("type", "unknown")
    assert metrics["Stage"]
    assert metrics.get("run_id") == ((event.get("doc") or {}).get("run") or {}).get("id")
    assert metrics["StepDuration"] >= 0
    outcome = "StepSucceeded" if error is None else "StepFailed"
    if error is not None and type(error).__name__ == "Relayflow.Throttled":
        outcome = "StepThrottled"
    assert metrics[outcome] == 1


@pytest.mark.parametrize(
    ("kind", "sample"), PLATFORM_SAMPLES, ids=[f"{k}/{s.stem}" for k, s in PLATFORM_SAMPLES]
)
def test_platform_handlers_answer_each_sample_in_their_contract(kind, sample: Path, lambda_sandbox):
    # Given the stack's table and bus (in moto) and the function's handler
    from relayflow.dal import create_table
    from relayflow.settings import get_settings

    lambda_sandbox.setenv("AWS_LAMBDA_FUNCTION_NAME", f"relayflow-dev-{kind}")
    create_table(client("dynamodb"))
    client("events").create_event_bus(Name=get_settings().event_bus_name)
    handler = load_handler(kind).handler
    event = json.loads(sample.read_text())
    # When it is invoked with the sample
    try:
        result = handler(event, lambda_context(kind))
    except Exception as exc:
        # Then only the authorizer may raise, and only API Gateway's "Unauthorized" (a 401)
        assert kind == "authorizer" and str(exc) == "Unauthorized", f"{kind}: {exc!r}"
        return
    json.dumps(result)
    if kind == "api":
        # an API Gateway proxy response in the error model, never a server error
        assert isinstance(result["statusCode"], int) and result["statusCode"] < 500, result
        body = json.loads(result["body"]) if result.get("body") else None
        if result["statusCode"] >= 400:
            assert set(body) >= {"code", "message", "details"}, body
    elif kind == "authorizer":
        assert result["policyDocument"]["Statement"][0]["Effect"] in {"Allow", "Deny"}
        assert "principalId" in result
    elif kind == "maintenance":
        # the counts of what it did, and the DLQ's depth (an empty DLQ: nothing due)
        assert result == {
            "started": [],
            "postponed": [],
            "skipped": [],
            "depth": 0,
            "express": {"timed_out": [], "settled": []},
        }
    elif kind == "step_events":
        # every record read; the retried sample publishes its steps' events, a control
        # message (CloudWatch Logs checking the destination) nothing
        published = {"task_retried": 7, "control_message": 0}[sample.stem]
        assert result["published"] == published and result["skipped"] == 0, result
