"""``relayflow compile --cost``: the estimate per 1,000,000 runs of a definition's paths."""

from __future__ import annotations

import json

import yaml
from workflow_shapes import priced

from relayflow.cli.main import main
from relayflow.compiler import CompileOptions, compile_workflow
from relayflow.cost.bill import LOGS_ITEM
from relayflow.cost.estimate import estimate
from relayflow.validation import validate_data

#: double (Lambda) → each.size → each.check → each (Map: price, a Lambda) → done: with 3 items,
#: 5 + 3 = 8 transitions and 1 + 3 = 4 Lambda invocations on the path that succeeds.
PRICED = priced()


def test_compile_cost_prints_both_paths_on_both_engines(tmp_path, capsys):
    source = tmp_path / "priced.yaml"
    source.write_text(yaml.safe_dump(PRICED))
    assert main(["compile", str(source), "--cost", "--items", "3"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.split()}
    # (the for_each passes its list check, count and limit check before its Map; the
    # dearest path reads an empty list's text too)
    assert rows["cheapest"][1:3] == ["9", "4"]
    assert rows["dearest"][1:3] == ["11", "4"]
    workflow, _ = validate_data(PRICED)
    assert workflow is not None
    # Standard priced on the Standard machine, Express on the machine Express runs (the
    # workflow wrapped in _run and its native recording states)
    standard = estimate(compile_workflow(workflow).asl, items=3)
    express_asl = compile_workflow(workflow, CompileOptions(express=True)).asl
    assert "_run" in express_asl["States"]
    express = estimate(express_asl, items=3)
    assert rows["cheapest"][4] == f"${standard.per_million('cheapest', 'standard'):,.2f}"
    assert rows["cheapest"][5] == f"${express.per_million('cheapest', 'express'):,.2f}"
    # (the wrapper's 3 states are Express time, not transitions in the Standard columns)
    assert express.cheapest.transitions == standard.cheapest.transitions + 3
    assert "{" not in out  # the report replaces the ASL on stdout
    # Express's execution log (every event) is in its price; Standard logs no error here
    assert "Express logs every history event" in out
    logs = [line.dollars for line in express.bills[("cheapest", "express")].lines]
    assert express.bills[("cheapest", "express")].lines[2].item == LOGS_ITEM and logs[2] > 0
    assert [
        line.dollars
        for line in standard.bills[("cheapest", "standard")].lines
        if line.item == LOGS_ITEM
    ] == [0.0]


def test_compile_cost_marks_the_engine_auto_picks_and_why(tmp_path, capsys):
    # Given a short workflow (Express) and one with an approval (Standard)
    short = tmp_path / "priced.yaml"
    short.write_text(yaml.safe_dump(PRICED))
    approval = {
        "id": "review",
        "start": "ask",
        "steps": {"ask": {"type": "approval", "title": "ok?"}},
    }
    gated = tmp_path / "review.yaml"
    gated.write_text(yaml.safe_dump(approval))
    # When each is priced / Then the column auto picks is starred and the reason is given
    assert main(["compile", str(short), "--cost"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("path"))
    assert "express *" in header and "standard *" not in header
    assert "engine: auto picks express (*): short (" in out
    assert main(["compile", str(gated), "--cost"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("path"))
    assert "standard *" in header and "express *" not in header
    assert "engine: auto picks standard (*): step 'ask' (approval) waits for a decision" in out


def test_compile_cost_with_output_writes_the_asl_too(tmp_path, capsys):
    source, target = tmp_path / "priced.yaml", tmp_path / "priced.asl.json"
    source.write_text(yaml.safe_dump(PRICED))
    assert main(["compile", str(source), "--cost", "-o", str(target)]) == 0
    # The machine a new workflow would deploy: Express, so wrapped in its recording states
    written = json.loads(target.read_text())
    assert written["StartAt"] == "_run"
    assert written["States"]["_run"]["Branches"][0]["StartAt"] == "double"
    assert "per 1,000,000 runs" in capsys.readouterr().out


def test_compile_refuses_fewer_than_one_item(tmp_path, capsys):
    source = tmp_path / "priced.yaml"
    source.write_text(yaml.safe_dump(PRICED))
    assert main(["compile", str(source), "--cost", "--items", "0"]) == 2
    assert "--items must be at least 1" in capsys.readouterr().err
