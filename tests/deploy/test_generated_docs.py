"""docs/operations.md's reference tables are what tools/gen_operations_docs.py renders from
template.yaml (and samconfig.toml, events/outcomes.json) now."""

from __future__ import annotations

import importlib.util

from sam_template import ROOT


def _generator():
    spec = importlib.util.spec_from_file_location(
        "gen_operations_docs", ROOT / "tools" / "gen_operations_docs.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_tables_are_not_stale():
    generator = _generator()
    current = generator.DOC.read_text()
    # Then rendering the tables again changes nothing (else: run the tool and commit)
    assert generator.render(current) == current, "run .venv/bin/python tools/gen_operations_docs.py"


def test_a_template_change_makes_them_stale():
    # Given the document with one alarm row edited by hand
    generator = _generator()
    current = generator.DOC.read_text()
    edited = current.replace("`relayflow-<stage>-recorder-dlq`", "`relayflow-<stage>-old-name`", 1)
    assert edited != current
    # Then rendering restores what the template says
    assert generator.render(edited) == current


def test_the_tables_cover_every_parameter_output_alarm_and_function():
    generator = _generator()
    template = generator.load_template()
    text = generator.DOC.read_text()
    for name in (*template["Parameters"], *template["Outputs"]):
        assert f"| `{name}` |" in text, name
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "AWS::Serverless::Function":
            assert f"| `{logical_id}` |" in text, logical_id
            assert f"sam local invoke {logical_id} -e events/" in text, logical_id
        if resource["Type"] == "AWS::CloudWatch::Alarm":
            name = resource["Properties"]["AlarmName"]["Fn::Sub"].replace("${Stage}", "<stage>")
            assert f"`{name}`" in text, logical_id
