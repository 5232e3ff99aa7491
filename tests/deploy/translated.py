"""The SAM-translated template (what CloudFormation receives), its dependency graph and the
physical names it gives account-global resources.

:func:`translate` runs ``sam_translate.py`` with the SAM CLI's Python for one set of parameter
values (cached per process: each translation takes about a second).
:func:`dependency_graph` is the graph CloudFormation orders resources by: an edge for every
``Ref``, ``Fn::GetAtt``, ``Fn::Sub`` variable and ``DependsOn`` that names another resource.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from functools import cache
from typing import Any

import pytest
from graphs import strongly_connected
from sam_template import ROOT, pseudo_parameters, template_parameters

SAM_PYTHON = ROOT / ".venv" / "tools" / "sam" / "bin" / "python"
CFN_LINT = ROOT / ".venv" / "tools" / "sam" / "bin" / "cfn-lint"
_SUB_TOKEN = re.compile(r"\$\{([^}!][^}]*)\}")


@cache
def _translated_text(overrides: str) -> str:
    if not SAM_PYTHON.exists():
        pytest.fail("the SAM CLI is missing: run `make sam-cli` (make test does)")
    done = subprocess.run(
        [
            str(SAM_PYTHON),
            str(ROOT / "tests" / "deploy" / "sam_translate.py"),
            "--parameter-overrides",
            overrides,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": os.environ.get("PATH", ""), "SAM_CLI_TELEMETRY": "0", "HOME": "/tmp"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def translate(**parameters: str) -> dict[str, Any]:
    """template.yaml as plain CloudFormation for these parameter values (a fresh copy)."""
    return json.loads(_translated_text(json.dumps(parameters, sort_keys=True)))


def translated_text(**parameters: str) -> str:
    return _translated_text(json.dumps(parameters, sort_keys=True))


# ----------------------------------------------------------------------------- dependencies


def references(value: Any, resources: set[str]) -> set[str]:
    """The resources an intrinsic-function tree names (Ref, GetAtt, Sub variables)."""
    found: set[str] = set()
    if isinstance(value, list):
        for item in value:
            found |= references(item, resources)
    elif isinstance(value, dict):
        for key, arg in value.items():
            if key == "Ref" and isinstance(arg, str):
                found.add(arg)
            elif key == "Fn::GetAtt":
                target = arg[0] if isinstance(arg, list) else str(arg).split(".", 1)[0]
                found.add(target)
            elif key == "Fn::Sub":
                text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
                for token in _SUB_TOKEN.findall(text):
                    name = token.split(".", 1)[0]
                    if token not in variables:
                        found.add(name)
                found |= references(variables, resources)
            else:
                found |= references(arg, resources)
    return found & resources


def dependency_graph(template: dict[str, Any]) -> dict[str, set[str]]:
    """Logical id → the logical ids CloudFormation must create first."""
    resources = template["Resources"]
    names = set(resources)
    graph: dict[str, set[str]] = {}
    for logical_id, resource in resources.items():
        needs = references(
            {k: v for k, v in resource.items() if k not in ("DependsOn", "Type")}, names
        )
        depends = resource.get("DependsOn") or []
        needs |= set([depends] if isinstance(depends, str) else depends) & names
        graph[logical_id] = needs
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with a cycle (Tarjan), each sorted."""
    return [
        component
        for component in strongly_connected(graph)
        if len(component) > 1 or component[0] in graph.get(component[0], ())
    ]


# ----------------------------------------------------------------------------- names

#: Resource type → the property holding a name that must be unique in the account and region
#: (or, for buckets, everywhere): two stacks that set the same value collide.
ACCOUNT_GLOBAL_NAMES = {
    "AWS::CloudWatch::Alarm": "AlarmName",
    "AWS::CloudWatch::Dashboard": "DashboardName",
    "AWS::DynamoDB::Table": "TableName",
    "AWS::EventSchemas::Registry": "RegistryName",
    "AWS::Events::EventBus": "Name",
    "AWS::IAM::ManagedPolicy": "ManagedPolicyName",
    "AWS::IAM::Role": "RoleName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::Lambda::LayerVersion": "LayerName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::Logs::QueryDefinition": "Name",
    "AWS::S3::Bucket": "BucketName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::SSM::Parameter": "Name",
    "AWS::Scheduler::ScheduleGroup": "Name",
    "AWS::SecretsManager::Secret": "Name",
    "AWS::StepFunctions::StateMachine": "StateMachineName",
}


class NameResolver:
    """Resolves name expressions of the translated template for one set of parameters."""

    def __init__(self, template: dict[str, Any], parameters: dict[str, str]) -> None:
        self.template = template
        self.parameters = template_parameters(template, parameters)
        self.pseudo = pseudo_parameters(self.parameters)

    def ref(self, name: str) -> str:
        if name in self.pseudo:
            return self.pseudo[name]
        if name in self.parameters:
            return self.parameters[name]
        resource = self.template["Resources"][name]
        prop = ACCOUNT_GLOBAL_NAMES.get(resource["Type"])
        value = (resource.get("Properties") or {}).get(prop or "")
        if value is None:
            raise KeyError(f"{name} ({resource['Type']}) has no name of its own")
        return self.resolve(value)

    def resolve(self, value: Any) -> str:
        if isinstance(value, str):
            return value
        ((key, arg),) = value.items()
        if key == "Ref":
            return self.ref(arg)
        if key == "Fn::Sub":
            text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])

            def replace(match: re.Match[str]) -> str:
                token = match.group(1)
                if token in variables:
                    return self.resolve(variables[token])
                return self.ref(token)

            return _SUB_TOKEN.sub(replace, text)
        if key == "Fn::Join":
            return arg[0].join(self.resolve(v) for v in arg[1])
        raise KeyError(f"cannot resolve {key} in a name")

    def physical_names(self) -> dict[str, str]:
        """``Type Name`` → logical id, for every resource with an account-global name.
        Schedules and rules are named within their group or bus (``default`` if none)."""
        found: dict[str, str] = {}
        for logical_id, resource in self.template["Resources"].items():
            kind, props = resource["Type"], resource.get("Properties") or {}
            value = props.get(ACCOUNT_GLOBAL_NAMES.get(kind, ""))
            if kind in _SCOPED_NAMES:
                scope, name = (props.get(p) for p in _SCOPED_NAMES[kind])
                scope = self.resolve(scope) if scope is not None else "default"
                value = f"{scope}/{self.resolve(name)}"
            if value is not None:
                found[f"{kind} {self.resolve(value)}"] = logical_id
        return found


#: Names unique within a schedule group or an event bus: (scope property, name property).
_SCOPED_NAMES = {
    "AWS::Scheduler::Schedule": ("GroupName", "Name"),
    "AWS::Events::Rule": ("EventBusName", "Name"),
}
