"""relayflow.observability: what every deployed function writes to CloudWatch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from sam_template import ROOT, function_resources, load_template

from relayflow import observability
from relayflow.errors import InvalidArgsError
from relayflow.observability import is_sensitive_key, logger, redact, step_handler

EVENT = {
    "step": {"key": "charge", "type": "tool", "config": "{}"},
    "doc": {"run": {"id": "run-1", "workflow_id": "orders", "tenant": "acme"}},
    "context": {"attempt": 2},
}


@pytest.mark.parametrize(
    "key",
    [
        "authorization",
        "Authorization",
        "password",
        "client_secret",
        "secret",
        "token",
        "access_token",
        "accessToken",
        "api_key",
        "apiKey",
        "x-api-key",
        "X-Api-Key",
        "signature",
        "X-Hub-Signature-256",
        "private_key",
        "Cookie",
    ],
)
def test_keys_that_hold_credentials_are_sensitive(key):
    assert is_sensitive_key(key)


@pytest.mark.parametrize(
    "key",
    ["secret_name", "token_type", "max_tokens", "total_tokens", "step_key", "run_id", "status"],
)
def test_keys_that_name_or_count_things_are_not(key):
    assert not is_sensitive_key(key)


def test_redact_masks_nested_values_and_credentials_in_text():
    # Given a log payload with credentials at several depths and inside text
    payload = {
        "headers": {"Authorization": "Bearer abc.def.ghi", "Content-Type": "application/json"},
        "auth": [{"password": "hunter2"}],
        "url": "https://api.example.com/v1?api_key=abcd1234&page=2",
        "note": "retrying with token=s3cr3t",
        "secret_name": "relayflow/stripe",
        "count": 3,
    }
    # When it is redacted
    clean = redact(payload)
    # Then no credential survives, and everything else does
    text = json.dumps(clean)
    for leaked in ("abc.def.ghi", "hunter2", "abcd1234", "s3cr3t"):
        assert leaked not in text
    assert clean["headers"]["Content-Type"] == "application/json"
    assert clean["url"] == "https://api.example.com/v1?api_key=***&page=2"
    assert clean["secret_name"] == "relayflow/stripe"
    assert clean["count"] == 3


def _log_lines(code: str) -> list[dict]:
    """Run ``code`` in a fresh interpreter and parse the JSON lines it logs (stderr)."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    return [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]


def test_every_log_line_is_redacted_extra_keys_appended_keys_and_messages():
    lines = _log_lines(
        "from relayflow.observability import logger\n"
        "logger.append_keys(api_key='k-123456')\n"
        "logger.info('calling', extra={'headers': {'x-api-key': 'k-abcdef'}})\n"
        "logger.info({'password': 'p-123456'})\n"
        "logger.info('Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig')\n"
    )
    assert len(lines) == 3
    text = json.dumps(lines)
    for leaked in ("k-123456", "k-abcdef", "p-123456", "eyJhbGciOiJIUzI1NiJ9"):
        assert leaked not in text
    assert lines[0]["headers"]["x-api-key"] == "***"
    assert lines[0]["service"] == "relayflow"


def test_step_handler_puts_the_correlation_keys_on_every_line_and_removes_them_after():
    lines = _log_lines(
        "from relayflow.observability import logger, step_handler\n"
        "from relayflow.errors import InvalidArgsError\n"
        "@step_handler\n"
        "def handler(event, context):\n"
        "    logger.info('working')\n"
        "    raise InvalidArgsError('bad amount')\n"
        f"event = {EVENT!r}\n"
        "try:\n"
        "    handler(event, None)\n"
        "except InvalidArgsError:\n"
        "    pass\n"
        "logger.info('after')\n"
    )
    working, failed, after = lines
    for line in (working, failed):
        assert line["run_id"] == "run-1"
        assert line["workflow_id"] == "orders"
        assert line["tenant"] == "acme"
        assert line["step_key"] == "charge"
        assert line["step_type"] == "tool"
        assert line["attempt"] == 2
    assert failed["message"] == "step failed"
    assert failed["error"] == "Relayflow.InvalidArgs"
    assert "run_id" not in after


def _metrics(capsys: pytest.CaptureFixture[str]) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]


def test_in_lambda_each_invocation_writes_one_emf_line_with_the_dashboard_names(
    monkeypatch, capsys
):
    # Given a step handler running inside Lambda
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "relayflow-dev-tool")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Relayflow")

    @step_handler
    def handler(event, context):
        return {"output": 1}

    # When it succeeds once
    handler(EVENT, None)
    # Then one EMF document carries StepSucceeded/StepFailed/StepDuration by StepType
    (line,) = _metrics(capsys)
    (directive,) = line["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "Relayflow"
    assert [sorted(d) for d in directive["Dimensions"]] == [["Stage", "StepType", "service"]]
    names = {m["Name"]: m["Unit"] for m in directive["Metrics"]}
    assert names == {
        "StepSucceeded": "Count",
        "StepFailed": "Count",
        "StepDuration": "Milliseconds",
    }
    assert (line["StepSucceeded"], line["StepFailed"]) == (1.0, 0.0)
    assert isinstance(line["StepDuration"], float)
    assert line["StepType"] == "tool"
    assert line["run_id"] == "run-1" and line["step_key"] == "charge"


def test_a_failed_step_counts_as_failed_and_a_throttled_one_as_throttled(monkeypatch, capsys):
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "relayflow-dev-tool")

    class Throttled(InvalidArgsError):
        error_name = observability.THROTTLED_ERROR

    @step_handler
    def failing(event, context):
        raise InvalidArgsError("no")

    @step_handler
    def throttled(event, context):
        raise Throttled("later")

    for handler, error in ((failing, InvalidArgsError), (throttled, Throttled)):
        with pytest.raises(error):
            handler(EVENT, None)
    failed, limited = _metrics(capsys)
    assert failed["error"] == "Relayflow.InvalidArgs"
    assert failed["StepFailed"] == 1.0
    assert limited["StepThrottled"] == 1.0
    assert limited["StepFailed"] == 0.0


def test_outside_lambda_stdout_stays_clean(monkeypatch, capsys):
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)

    @step_handler
    def handler(event, context):
        return {"output": 1}

    handler(EVENT, None)
    assert capsys.readouterr().out == ""


def test_record_metric_uses_the_dimensions_the_dlq_alarm_watches(monkeypatch, capsys):
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "relayflow-dev-recorder")
    observability.record_metric("DlqDepth", 3)
    (line,) = _metrics(capsys)
    (directive,) = line["_aws"]["CloudWatchMetrics"]
    assert [sorted(d) for d in directive["Dimensions"]] == [["Stage", "service"]]
    assert line["DlqDepth"] == 3.0


def test_the_tracer_is_never_loaded_by_a_handler_import():
    # The X-Ray SDK costs 2x import boto3; Lambda active tracing already records segments
    for kind in function_resources(load_template()):
        code = (
            "import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('app', 'functions/{kind}/app.py')\n"
            "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
            "heavy = [m for m in ('aws_xray_sdk', 'boto3', 'moto') if m in sys.modules]\n"
            "print(','.join(heavy))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
        )
        assert done.stdout.strip() == "", f"functions/{kind} imports {done.stdout.strip()}"


def test_logger_is_the_one_powertools_logger():
    assert logger is observability.logger
    assert logger.service == "relayflow"
