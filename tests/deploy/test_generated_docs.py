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


def test_the_resource_table_counts_what_the_template_holds():
    # Given the generated "what the stack holds" table (its counts were written by hand, and
    # drifted: eight step functions for ten, three dead-letter queues for four, ten alarms …)
    generator = _generator()
    template = generator.load_template()
    text = generator.DOC.read_text()
    section = text[
        text.index("<!-- generated:resources -->") : text.index("<!-- end generated:resources -->")
    ]

    def count(kind: str) -> int:
        return sum(1 for r in template["Resources"].values() if r["Type"] == kind)

    # Then each count is the template's
    assert f"{generator._count(count('AWS::SQS::Queue'), 'dead-letter queue')} |" in section
    assert f"{generator._count(count('AWS::CloudWatch::Alarm'), 'alarm')}, `AlarmTopic`" in section
    assert f"{generator._count(count('AWS::Logs::LogGroup'), 'log group')} (" in section
    functions = count("AWS::Serverless::Function")
    steps = len(generator._step_functions(template))
    assert f"{generator._count(steps, 'step function')} |" in section
    assert f"{generator._count(functions - steps, 'platform function')} |" in section
    # And an edited count is restored by rendering
    edited = text.replace("four dead-letter queues", "three dead-letter queues", 1)
    assert edited != text and generator.render(edited) == text


def test_the_step_events_function_is_documented_as_a_log_subscriber():
    text = _generator().DOC.read_text()
    (row,) = [
        line for line in text.splitlines() if line.startswith("| `StepEventsFunction` | `functions")
    ]
    assert "CloudWatch Logs subscription of `StepEventsLogGroup`" in row
