"""The JSON Schemas of Relayflow's bus events: published in docs/events/ and, verbatim, in
the stack's EventBridge schema registry. tests/integration/test_recorder.py and
test_step_events.py validate every event they capture against them (event_schemas.py)."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
from event_schemas import SCHEMAS, schemas, validate_event
from sam_template import load_template

from relayflow.control.recorder import LIFECYCLE_TYPES
from relayflow.control.step_events import DETAIL_TYPE_PREFIX, KINDS

TEMPLATE = load_template()
RUN_END = {
    "version": "0",
    "id": "e1",
    "detail-type": "relayflow.run.failed",
    "source": "relayflow",
    "account": "123456789012",
    "time": "2026-12-01T10:00:00Z",
    "region": "us-east-1",
    "resources": ["arn:aws:states:us-east-1:123456789012:execution:relayflow-dev-acme_wf:r1"],
    "detail": {
        "tenant": "acme",
        "relayflow_tenant": "acme",
        "workflow_id": "wf",
        "run_id": "r1",
        "version": 2,
        "status": "failed",
        "error": "Relayflow.Transient",
        "failing_step": "charge",
        "outcome": "failed",
    },
}


@pytest.mark.parametrize("name", ["relayflow.run", "relayflow.step"])
def test_the_registry_publishes_the_documented_schema_verbatim(name):
    (schema,) = [
        r["Properties"]
        for r in TEMPLATE["Resources"].values()
        if r["Type"] == "AWS::EventSchemas::Schema" and r["Properties"]["SchemaName"] == name
    ]
    assert schema["Type"] == "JSONSchemaDraft4"
    assert schema["RegistryName"] == {"Fn::GetAtt": ["EventSchemaRegistry", "RegistryName"]}
    documented = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    assert json.loads(schema["Content"]) == documented
    jsonschema.Draft4Validator.check_schema(documented)


def test_the_schemas_name_every_detail_type_the_code_emits():
    run_types = schemas()["relayflow.run."]["properties"]["detail-type"]["enum"]
    step_types = schemas()["relayflow.step."]["properties"]["detail-type"]["enum"]
    assert set(run_types) == set(LIFECYCLE_TYPES.values())
    assert set(step_types) == {f"{DETAIL_TYPE_PREFIX}{kind}" for kind in KINDS}


def test_a_valid_run_end_passes_and_wrong_ones_are_refused():
    validate_event(RUN_END)
    missing = copy.deepcopy(RUN_END)
    del missing["detail"]["run_id"]
    started_with_outcome = copy.deepcopy(RUN_END)
    started_with_outcome["detail-type"] = "relayflow.run.started"
    started_with_outcome["detail"]["status"] = "running"
    wrong_status = copy.deepcopy(RUN_END)
    wrong_status["detail"]["status"] = "succeeded"
    for event in (missing, started_with_outcome, wrong_status):
        with pytest.raises(jsonschema.ValidationError):
            validate_event(event)
    with pytest.raises(LookupError):
        validate_event({**RUN_END, "detail-type": "relayflow.approval.requested"})
