"""A run's output holds no path of the machine it ran on.

The declined payment example (``payment_retry`` with ``payment_retry_declined.json``) ends on
its error route, so its output keeps the caught error (``output.error``). That error's
``Cause`` is the failed Lambda's body, whose ``stackTrace`` names the engine's files (the
checkout locally, ``/opt/python`` on AWS). ``relayflow run`` and ``run_workflow`` now give the
output in the public form the API gives it (``relayflow.causes.public_document``): the error's
name, message and details, never its stack trace.
"""

from __future__ import annotations

import json
import sys

import pytest
from relayflow_testing import ROOT

from relayflow.local import LocalRuntime
from relayflow.runner import run_workflow
from relayflow.validation import load_workflow

pytestmark = pytest.mark.integration
BARE_RUNTIME = True


def test_the_declined_payments_error_names_its_message_not_the_engines_files(
    runtime: LocalRuntime,
) -> None:
    # Given the payment example and its declined card
    workflow = load_workflow(ROOT / "workflows" / "examples" / "payment_retry.yaml")
    trigger = json.loads((ROOT / "events" / "examples" / "payment_retry_declined.json").read_text())
    # When it runs
    result = run_workflow(workflow, trigger, runtime=runtime)
    # Then the run took the error route, and its output keeps the error's name and message
    assert result.status == "succeeded"
    error = result.output["error"]
    assert error["Error"] == "Relayflow.ExpressionError"
    assert error["Cause"].startswith("expression 'int(trigger.payment.amount_cents)' failed")
    assert error["details"] == {
        "expression": "int(trigger.payment.amount_cents)",
        "path": "amount_cents",
    }
    # And nothing in the output names a file of the checkout, the interpreter or the layer
    text = json.dumps(result.output)
    for path in (str(ROOT), sys.prefix, "/opt/python", "/var/task", "stackTrace", ".py"):
        assert path not in text, path
