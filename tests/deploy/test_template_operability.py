"""From an alarm to the failing run, for this stage only.

The failed-runs alarms count the recorder's metric with the stage's dimension (AWS/States
counts every state machine of the account: dev's failures raised prod's alarm). The
dashboard draws every metric the code emits, lists the latest failed runs (run id, workflow,
failing step, error and a link to the execution) from the recorder's "run ended" lines
(tests/integration/test_recorder.py checks the line), and saved queries answer the common
questions: a run's lines, a tenant's failures, the slowest steps.
"""

from __future__ import annotations

import ast
import json

import pytest
from sam_template import ROOT
from stack import DEV, RESOURCES

from relayflow import observability
from relayflow.control.recorder import RUN_METRICS

DASHBOARD = json.loads(DEV.resolve(RESOURCES["Dashboard"]["Properties"]["DashboardBody"]))


def emitted_metrics() -> set[str]:
    """Every metric name the code emits: ``record_metric("X", …)`` and
    ``add_metric(name="X", …)`` with a literal name."""
    found: set[str] = set()
    for path in (ROOT / "shared" / "relayflow").rglob("*.py"):
        if "local" in path.relative_to(ROOT / "shared" / "relayflow").parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
            if name == "record_metric" and node.args and isinstance(node.args[0], ast.Constant):
                found.add(str(node.args[0].value))
            if name == "add_metric":
                for keyword in node.keywords:
                    if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                        found.add(str(keyword.value.value))
    # The run metrics are looked up by status (RUN_METRICS[detail.status])
    return found | set(RUN_METRICS.values())


def test_every_metric_the_code_emits_is_on_the_dashboard():
    metrics = emitted_metrics()
    assert {"RunFailed", "RunDuration", "StepDuration", "DlqDepth", "BreakerTrips"} <= metrics
    text = json.dumps(DASHBOARD)
    assert not sorted(m for m in metrics if f'"{m}"' not in text and f'\\"{m}\\"' not in text)


def test_no_dashboard_widget_counts_other_stages_state_machines():
    # A SEARCH over AWS/States matched every relayflow machine of the account (dev and prod)
    assert "AWS/States" not in json.dumps(DASHBOARD)
    expressions = [
        item["expression"]
        for widget in DASHBOARD["widgets"]
        for line in widget["properties"].get("metrics", [])
        for item in line
        if isinstance(item, dict) and "expression" in item
    ]
    searches = [e for e in expressions if "SEARCH(" in e]
    assert searches and not [e for e in searches if 'Stage="dev"' not in e]


@pytest.mark.parametrize(
    ("alarm", "status"), [("FailedRunsAlarm", "FAILED"), ("TimedOutRunsAlarm", "TIMED_OUT")]
)
def test_the_run_alarms_count_the_stages_recorded_run_ends(alarm, status):
    props = DEV.resolve(RESOURCES[alarm]["Properties"])
    assert props["Namespace"] == observability.DEFAULT_NAMESPACE
    assert props["MetricName"] == RUN_METRICS[status]
    dimensions = {d["Name"]: d["Value"] for d in props["Dimensions"]}
    assert dimensions == {"service": observability.SERVICE, "Stage": "dev"}
    assert "Latest failed runs" in props["AlarmDescription"]


def test_the_dashboard_lists_the_latest_failed_runs_with_step_error_and_a_link():
    (widget,) = [
        w for w in DASHBOARD["widgets"] if w["properties"].get("title") == "Latest failed runs"
    ]
    assert widget["type"] == "log"
    query = widget["properties"]["query"]
    # From the stage's recorder log group, the "run ended" lines of failed or timed-out runs
    assert query.startswith(f"SOURCE '{DEV.ref('RecorderLogGroup')}'")
    assert "message = 'run ended'" in query and "'failed', 'timed_out'" in query
    for field in ("run_id", "workflow_id", "failing_step", "error"):
        assert field in query
    # And each row links to the execution in the Step Functions console
    assert "states/home?region=us-east-1#/v2/executions/details/', execution_arn)" in query
    # And it is the first row of the dashboard, beside the runs graph
    assert (widget["x"], widget["y"]) == (12, 0)


def _queries() -> dict[str, dict]:
    return {
        DEV.resolve(r["Properties"]["Name"]): r["Properties"]
        for r in RESOURCES.values()
        if r["Type"] == "AWS::Logs::QueryDefinition"
    }


def test_saved_queries_answer_the_common_questions_for_this_stage():
    queries = _queries()
    assert {
        "relayflow-dev/all-log-lines-of-one-run",
        "relayflow-dev/failed-runs-of-one-tenant",
        "relayflow-dev/slowest-steps",
    } <= set(queries)
    tenant = queries["relayflow-dev/failed-runs-of-one-tenant"]
    assert tenant["LogGroupNames"] == [{"Ref": "RecorderLogGroup"}]
    assert 'tenant = "TENANT"' in tenant["QueryString"]


def test_a_runs_lines_include_every_log_group_of_the_stack():
    # The step-events log group (per-step events of workflows with events.steps) was missing
    groups = {
        g["Ref"] for g in _queries()["relayflow-dev/all-log-lines-of-one-run"]["LogGroupNames"]
    }
    every = {k for k, r in RESOURCES.items() if r["Type"] == "AWS::Logs::LogGroup"}
    assert every - groups == {"ApiAccessLogGroup"}  # access lines carry no run id


def test_the_dashboards_text_names_every_saved_query_of_the_stage():
    # Given the saved Logs Insights queries the stack defines
    queries = sorted(
        DEV.resolve(resource["Properties"]["Name"])
        for resource in RESOURCES.values()
        if resource["Type"] == "AWS::Logs::QueryDefinition"
    )
    assert len(queries) >= 4 and all(q.startswith("relayflow-dev/") for q in queries)
    # Then the dashboard's text widget names each of them (it is where an operator looks first)
    text = " ".join(
        widget["properties"]["markdown"]
        for widget in DASHBOARD["widgets"]
        if widget["type"] == "text"
    )
    assert [q for q in queries if q not in text] == []
