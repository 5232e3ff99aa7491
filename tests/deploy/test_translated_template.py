"""The template CloudFormation receives (SAM-translated) is one it accepts.

``sam validate --lint`` lints the SAM template, before the transform: it could not see the
circular dependency SchedulerRole → TriggerFunction → TriggerFunctionRole → SchedulerRole that
the translation produced (cfn-lint on the translated template reported E3004 three times, and
CloudFormation refuses such a change set). These tests lint and walk the translated template
itself, for the dev and the prod stage.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from sam_template import Resolver, load_template
from translated import (
    CFN_LINT,
    NameResolver,
    cycles,
    dependency_graph,
    translate,
    translated_text,
)

STAGES = ("dev", "prod")


@pytest.mark.parametrize("stage", STAGES)
def test_cfn_lint_finds_no_error_in_the_translated_template(stage, tmp_path):
    if not CFN_LINT.exists():
        pytest.fail("cfn-lint is missing: run `make sam-cli` (make test does)")
    # Given the template as `sam deploy` sends it for the stage
    template = tmp_path / "template.json"
    template.write_text(translated_text(Stage=stage))
    # When cfn-lint checks it with every rule
    done = subprocess.run(
        [str(CFN_LINT), "--format", "json", str(template)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    findings = json.loads(done.stdout or "[]")
    # Then no error rule matches (warnings and informational findings are not deploy blockers)
    errors = [
        f"{f['Rule']['Id']} {f['Message']} ({'/'.join(map(str, f['Location']['Path']))})"
        for f in findings
        if f["Level"] == "Error"
    ]
    assert not errors, "\n".join(errors)
    assert done.returncode in (0, 4, 8), done.stderr[-3000:]


@pytest.mark.parametrize("stage", STAGES)
def test_the_translated_template_has_no_circular_dependency(stage):
    # Given every Ref, GetAtt, Sub variable and DependsOn between resources
    graph = dependency_graph(translate(Stage=stage))
    # Then CloudFormation can order them: no resource depends on itself through others
    assert cycles(graph) == []


def test_the_cycle_check_sees_a_cycle_through_sub_and_depends_on():
    # Given a role whose policy names a function by Sub, and the function depends on the role
    template = {
        "Resources": {
            "Role": {
                "Type": "AWS::IAM::Role",
                "Properties": {"Policy": {"Fn::Sub": "${Function.Arn}:*"}},
            },
            "Function": {"Type": "AWS::Lambda::Function", "DependsOn": "Role"},
            "Other": {"Type": "AWS::SQS::Queue", "Properties": {"Name": {"Ref": "Role"}}},
        }
    }
    # Then the two form a cycle, and the queue that only uses the role is not part of it
    assert cycles(dependency_graph(template)) == [["Function", "Role"]]
    # And a Sub variable given its own value names no resource
    assert dependency_graph(
        {
            "Resources": {
                "A": {
                    "Type": "AWS::SQS::Queue",
                    "Properties": {"Name": {"Fn::Sub": ["${B}", {"B": "x"}]}},
                },
                "B": {"Type": "AWS::SQS::Queue", "Properties": {"Name": {"Ref": "A"}}},
            }
        }
    ) == {"A": set(), "B": {"A"}}


def test_dev_and_prod_stacks_in_one_account_share_no_physical_name():
    # Given both stages translated with their own parameter values
    names = {
        stage: NameResolver(translate(Stage=stage), {"Stage": stage}).physical_names()
        for stage in STAGES
    }
    # Then every account-global name (functions, log groups, queues, schedules, alarms …)
    # differs between the two stacks
    shared = sorted(set(names["dev"]) & set(names["prod"]))
    assert not shared, shared
    # And every such name carries its stage
    for stage, found in names.items():
        unstaged = sorted(name for name in found if stage not in name)
        assert not unstaged, unstaged


@pytest.mark.parametrize("logging", ["true", "external", "false"])
def test_access_logs_are_on_only_where_the_account_logging_role_is_set_first(logging):
    # Given the stack translated with the account-logging choice
    template = translate(Stage="prod", ConfigureApiGatewayLogging=logging)
    resolver = Resolver(load_template(), Stage="prod", ConfigureApiGatewayLogging=logging)
    (stage,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::ApiGateway::Stage"]
    setting = stage["Properties"]["AccessLogSetting"]
    condition, _, _ = setting["Fn::If"]
    # Then the stage writes access logs unless the account's role may be missing ("false")
    assert resolver.condition(condition) == (logging != "false")
    # And when this stack sets the role, the stage is created after it
    graph = dependency_graph(template)
    absent = {
        k
        for k, r in template["Resources"].items()
        if "Condition" in r and not resolver.condition(r["Condition"])
    }
    graph = {k: v - absent for k, v in graph.items() if k not in absent}
    stage_id = next(k for k, r in template["Resources"].items() if r is stage)
    assert ("ApiGatewayAccount" in _upstream(graph, stage_id)) == (logging == "true")


def _upstream(graph: dict[str, set[str]], node: str) -> set[str]:
    """Everything ``node`` depends on, directly or not."""
    found: set[str] = set()
    pending = [node]
    while pending:
        for target in graph.get(pending.pop(), ()):
            if target not in found:
                found.add(target)
                pending.append(target)
    return found
