"""``relayflow run`` with sub_workflow steps: children are found by id in the file's folder
(or ``--workflows``), published locally, and run by the parent."""

from __future__ import annotations

import json

import pytest

from relayflow.cli.main import main

PARENT = """
id: parent
start: call
steps:
  call: {type: sub_workflow, workflow_id: middle, input: {n: "{{ trigger.n }}"}}
"""
MIDDLE = """
id: middle
start: call
steps:
  call: {type: sub_workflow, workflow_id: leaf, input: {n: "{{ trigger.n }}"}}
"""
LEAF = """
id: leaf
start: square
steps:
  square: {type: transform, mapping: {squared: "{{ trigger.n * trigger.n }}"}}
"""


@pytest.mark.integration
def test_run_finds_children_and_grandchildren_in_the_files_folder(tmp_path, capsys):
    # Given a parent, its child and its grandchild side by side (and an unrelated bad file)
    (tmp_path / "parent.yaml").write_text(PARENT)
    (tmp_path / "middle.yaml").write_text(MIDDLE)
    (tmp_path / "leaf.yaml").write_text(LEAF)
    (tmp_path / "broken.yaml").write_text("id: [")

    # When the parent runs
    code = main(["run", str(tmp_path / "parent.yaml"), "--input", '{"n": 7}', "--json"])

    # Then it succeeds with the grandchild's output two levels down
    record = json.loads(capsys.readouterr().out)
    assert code == 0, record
    middle = record["output"]["steps"]["call"]["output"]["steps"]
    assert middle["call"]["output"]["steps"]["square"]["output"] == {"squared": 49}


def test_run_names_a_child_it_cannot_find(tmp_path, capsys):
    # Given a parent whose child is in no file of the folder
    (tmp_path / "parent.yaml").write_text(PARENT)
    other = tmp_path / "elsewhere"
    other.mkdir()

    # When it runs with --workflows pointing at an empty folder
    code = main(["run", str(tmp_path / "parent.yaml"), "--workflows", str(other)])

    # Then it is a usage error naming the missing workflow
    err = capsys.readouterr().err
    assert code == 2
    assert "workflow 'middle': no definition with that id" in err


@pytest.mark.integration
def test_relayflow_run_publishes_the_workflows_an_agent_calls(tmp_path, capsys):
    # Given an agent definition beside the workflow it calls as a tool (and its fixture)
    from relayflow.settings import override_settings

    call = {"type": "tool_call", "id": "q1", "name": "workflow_price-lookup"}
    turns = [
        {"content": [{**call, "input": {"sku": "A-9", "qty": 4}}]},
        {"content": [{"type": "text", "text": "A-9 costs 20."}]},
    ]
    (tmp_path / "cli_quote.json").write_text(json.dumps({"turns": turns}))
    (tmp_path / "child.yaml").write_text(
        "id: price-lookup\nstart: quote\nsteps:\n  quote:\n    type: transform\n"
        '    mapping: {price: "{{ trigger.qty * 5 }}"}\n'
    )
    (tmp_path / "quoter.yaml").write_text(
        "id: quoter\nstart: ask\nsteps:\n  ask:\n    type: agent\n"
        "    model: scripted:cli_quote\n    prompt: Quote\n    tools: [workflow.price-lookup]\n"
    )
    # When `relayflow run` runs it
    with override_settings(ai_fixtures_dir=str(tmp_path)):
        code = main(["run", str(tmp_path / "quoter.yaml"), "--json"])
    # Then the child was found in the folder, published and run by the agent
    record = json.loads(capsys.readouterr().out)
    assert code == 0, record
    (entry,) = record["output"]["steps"]["ask"]["output"]["tool_calls"]
    assert entry["output"]["steps"]["quote"]["price"] == 20
