"""``relayflow run`` on the local runtime counts its run's state transitions, retries
included (a module of its own: it opens its own LocalRuntime, one per process at a time)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from relayflow.local import LocalRuntime
from relayflow.runner import run_workflow
from relayflow.validation import validate_data

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_a_local_run_counts_its_transitions_with_its_retries():
    data = yaml.safe_load((ROOT / "workflows/examples/payment_retry.yaml").read_text())
    workflow, problems = validate_data(data)
    assert workflow is not None, problems
    # Given a declined card: charge fails its 3 attempts, then the error route records it
    with LocalRuntime(time_scale=0.001) as runtime:
        result = run_workflow(workflow, {"payment": {"amount_cents": "declined"}}, runtime=runtime)
    # Then: the init state, charge (entered once, retried twice) and record_failure
    assert (result.transitions, result.lambda_invocations) == (5, 3)
    assert result.to_dict()["transitions"] == 5
