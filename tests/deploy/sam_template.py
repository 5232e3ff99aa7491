"""Read template.yaml the way CloudFormation would, enough to test it offline.

:func:`load_template` parses the YAML short forms (``!Ref``, ``!Sub``, ``!GetAtt`` …) into their
long forms. :class:`Resolver` evaluates intrinsic functions for one stage, with the physical
names and ARNs the stack would give its resources (functions and log groups have explicit
names; other resources get a stand-in name). :func:`allows` is IAM's Allow check for one action
on one resource (wildcards in actions and resources, case-insensitive actions).
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
REGION = "us-east-1"
ACCOUNT = "123456789012"
#: The ARN prefixes of the account's state machines and of their executions.
MACHINES = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:"
EXECUTIONS = f"arn:aws:states:{REGION}:{ACCOUNT}:execution:"
PARTITION = "aws"
NO_VALUE = object()

_SHORT_FORMS = {
    "Ref": "Ref",
    "Condition": "Condition",
    **{
        name: f"Fn::{name}"
        for name in (
            "And",
            "Base64",
            "Cidr",
            "Equals",
            "FindInMap",
            "GetAZs",
            "GetAtt",
            "If",
            "ImportValue",
            "Join",
            "Not",
            "Or",
            "Select",
            "Split",
            "Sub",
        )
    },
}


class _TemplateLoader(yaml.SafeLoader):
    """SafeLoader that turns ``!Tag value`` into ``{"Fn::Tag": value}``."""


def _construct(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    key = _SHORT_FORMS.get(suffix, f"Fn::{suffix}")
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if key == "Fn::GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {key: value}


_TemplateLoader.add_multi_constructor("!", _construct)


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    return yaml.load(path.read_text(), Loader=_TemplateLoader)


def function_resources(template: dict[str, Any]) -> dict[str, str]:
    """Function folder name (``webhook_out``) → logical id, for every AWS::Serverless::Function."""
    found = {}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "AWS::Serverless::Function":
            code_uri = resource["Properties"]["CodeUri"]
            found[Path(code_uri).name] = logical_id
    return found


def function_env(template: dict[str, Any], logical_id: str) -> dict[str, Any]:
    """The variables a function gets: Globals', then its own (which win)."""
    globals_ = template["Globals"]["Function"].get("Environment") or {}
    own = template["Resources"][logical_id]["Properties"].get("Environment") or {}
    return {**(globals_.get("Variables") or {}), **(own.get("Variables") or {})}


def template_parameters(template: dict[str, Any], given: dict[str, str]) -> dict[str, str]:
    """The template's parameters: each one's default (as text), overridden by ``given``."""
    return {
        name: str(spec.get("Default", ""))
        for name, spec in (template.get("Parameters") or {}).items()
    } | given


def pseudo_parameters(parameters: dict[str, str]) -> dict[str, str]:
    """The pseudo parameters (``AWS::Region``…) of the stack deployed with ``parameters``."""
    return {
        "AWS::Region": REGION,
        "AWS::AccountId": ACCOUNT,
        "AWS::Partition": PARTITION,
        "AWS::StackName": f"relayflow-{parameters.get('Stage', 'dev')}",
        "AWS::URLSuffix": "amazonaws.com",
    }


class Resolver:
    """Evaluates intrinsic functions for one set of parameter values."""

    def __init__(self, template: dict[str, Any], **parameters: str) -> None:
        self.template = template
        self.parameters = template_parameters(template, parameters)
        self.pseudo = pseudo_parameters(self.parameters)

    # ------------------------------------------------------------------ names and ARNs

    def resource(self, logical_id: str) -> dict[str, Any]:
        return self.template["Resources"][logical_id]

    def ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return NO_VALUE
        if name in self.pseudo:
            return self.pseudo[name]
        if name in self.parameters:
            spec = (self.template.get("Parameters") or {}).get(name) or {}
            if spec.get("Type") == "CommaDelimitedList":
                return self.parameters[name].split(",")
            return self.parameters[name]
        resource = self.resource(name)
        props = resource.get("Properties") or {}
        kind = resource["Type"]
        if kind == "AWS::SQS::Queue" and "QueueName" in props:
            return self.resolve(props["QueueName"])
        if kind == "AWS::Serverless::Function":
            return self.resolve(props["FunctionName"])
        if kind == "AWS::Logs::LogGroup":
            return self.resolve(props["LogGroupName"])
        if kind in ("AWS::Events::EventBus", "AWS::Scheduler::ScheduleGroup"):
            return self.resolve(props["Name"])
        if kind == "AWS::SNS::Topic":
            return f"arn:{PARTITION}:sns:{REGION}:{ACCOUNT}:{self.resolve(props['TopicName'])}"
        if kind == "AWS::Serverless::LayerVersion":
            name = self.resolve(props["LayerName"])
            return f"arn:{PARTITION}:lambda:{REGION}:{ACCOUNT}:layer:{name}:1"
        return f"{self.pseudo['AWS::StackName']}-{name.lower()}"

    def get_att(self, logical_id: str, attribute: str) -> str:
        kind = self.resource(logical_id)["Type"]
        name = self.ref(logical_id)
        lambda_arn = f"arn:{PARTITION}:lambda:{REGION}:{ACCOUNT}:function:{name}"
        arns = {
            "AWS::Serverless::Function": lambda_arn,
            "AWS::Logs::LogGroup": f"arn:{PARTITION}:logs:{REGION}:{ACCOUNT}:log-group:{name}:*",
            "AWS::S3::Bucket": f"arn:{PARTITION}:s3:::{name}",
            "AWS::DynamoDB::Table": f"arn:{PARTITION}:dynamodb:{REGION}:{ACCOUNT}:table/{name}",
            "AWS::SQS::Queue": f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:{name}",
            "AWS::IAM::Role": f"arn:{PARTITION}:iam::{ACCOUNT}:role/{name}",
            "AWS::Events::EventBus": f"arn:{PARTITION}:events:{REGION}:{ACCOUNT}:event-bus/{name}",
            "AWS::CloudWatch::Alarm": f"arn:{PARTITION}:cloudwatch:{REGION}:{ACCOUNT}:alarm:{name}",
        }
        if kind == "AWS::SQS::Queue" and attribute == "QueueName":
            return name
        if kind == "AWS::EventSchemas::Registry" and attribute == "RegistryName":
            return self.resolve(self.resource(logical_id)["Properties"]["RegistryName"])
        if attribute != "Arn" or kind not in arns:
            raise KeyError(f"no stand-in for {logical_id}.{attribute} ({kind})")
        return arns[kind]

    # ------------------------------------------------------------------ intrinsic functions

    def condition(self, name: str) -> bool:
        return bool(self.resolve(self.template["Conditions"][name]))

    def sub(self, text: str, variables: dict[str, Any] | None = None) -> str:
        variables = variables or {}

        def replace(match: re.Match[str]) -> str:
            token = match.group(1)
            if token.startswith("!"):
                return "${" + token[1:] + "}"
            if token in variables:
                return str(self.resolve(variables[token]))
            if "." in token:
                return self.get_att(*token.split(".", 1))
            return str(self.ref(token))

        return re.sub(r"\$\{([^}]+)\}", replace, text)

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            items = [self.resolve(v) for v in value]
            return [v for v in items if v is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Fn::GetAtt":
                return self.get_att(*arg)
            if key == "Fn::Sub":
                return self.sub(arg) if isinstance(arg, str) else self.sub(arg[0], arg[1])
            if key == "Fn::Join":
                values = arg[1] if isinstance(arg[1], list) else self.resolve(arg[1])
                return arg[0].join(str(self.resolve(v)) for v in values)
            if key == "Fn::Split":
                return str(self.resolve(arg[1])).split(arg[0])
            if key == "Fn::If":
                name, then, otherwise = arg
                return self.resolve(then if self.condition(name) else otherwise)
            if key == "Fn::Equals":
                left, right = (self.resolve(v) for v in arg)
                return str(left) == str(right)
            if key == "Fn::Not":
                return not self.resolve(arg[0])
            if key == "Fn::And":
                return all(self.resolve(v) for v in arg)
            if key == "Fn::Or":
                return any(self.resolve(v) for v in arg)
            if key == "Condition":
                return self.condition(arg)
        resolved = {k: self.resolve(v) for k, v in value.items()}
        return {k: v for k, v in resolved.items() if v is not NO_VALUE}


# ----------------------------------------------------------------------------- IAM


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _matches(pattern: str, value: str, *, case_sensitive: bool) -> bool:
    pattern = pattern.replace("[", "[[]")
    if not case_sensitive:
        return fnmatch.fnmatchcase(value.lower(), pattern.lower())
    return fnmatch.fnmatchcase(value, pattern)


def statements(policy_document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from _as_list(policy_document.get("Statement") or [])


def allows(policy_statements: list[dict[str, Any]], action: str, resource: str) -> bool:
    """Whether an unconditional Allow statement grants ``action`` on ``resource`` (and no
    Deny statement refuses it)."""
    allowed = False
    for statement in policy_statements:
        if "Condition" in statement:
            continue
        actions = _as_list(statement.get("Action", []))
        resources = _as_list(statement.get("Resource", []))
        if not any(_matches(a, action, case_sensitive=False) for a in actions):
            continue
        if not any(_matches(r, resource, case_sensitive=True) for r in resources):
            continue
        if statement.get("Effect") == "Deny":
            return False
        allowed = allowed or statement.get("Effect") == "Allow"
    return allowed


def allows_item(
    policy_statements: list[dict[str, Any]], action: str, resource: str, leading_key: str
) -> bool:
    """Whether an Allow statement grants ``action`` on ``resource`` for an item (or a Query)
    whose partition key is ``leading_key``: statements without a condition, and those whose
    only condition is ``ForAllValues:StringLike`` on ``dynamodb:LeadingKeys``, count."""
    for statement in policy_statements:
        if statement.get("Effect") != "Allow":
            continue
        condition = statement.get("Condition")
        if condition is not None:
            if set(condition) != {"ForAllValues:StringLike"}:
                continue
            values = condition["ForAllValues:StringLike"]
            if set(values) != {"dynamodb:LeadingKeys"}:
                continue
            patterns = _as_list(values["dynamodb:LeadingKeys"])
            if not any(_matches(p, leading_key, case_sensitive=True) for p in patterns):
                continue
        if not any(
            _matches(a, action, case_sensitive=False) for a in _as_list(statement.get("Action", []))
        ):
            continue
        if any(
            _matches(r, resource, case_sensitive=True)
            for r in _as_list(statement.get("Resource", []))
        ):
            return True
    return False


def role_statements(template: dict[str, Any], resolver: Resolver, role: str) -> list[Any]:
    """Every statement of an AWS::IAM::Role's inline policies, resolved."""
    props = template["Resources"][role]["Properties"]
    found: list[Any] = []
    for policy in props.get("Policies") or []:
        found.extend(statements(resolver.resolve(policy["PolicyDocument"])))
    return found


# ----------------------------------------------------------------------------- tools


def python312() -> str | None:
    """A working python3.12 for ``sam build`` (the functions' runtime): a pyenv install, or
    one on PATH. A pyenv shim that is not set to 3.12 does not count."""
    candidates = [
        *sorted(Path("/root/.pyenv/versions").glob("3.12.*/bin/python3.12"), reverse=True),
        *sorted(Path.home().glob(".pyenv/versions/3.12.*/bin/python3.12"), reverse=True),
    ]
    on_path = shutil.which("python3.12")
    if on_path:
        candidates.append(Path(on_path))
    for candidate in candidates:
        try:
            done = subprocess.run(
                [str(candidate), "-c", "import sys; print(sys.version_info[:2])"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except OSError:
            continue
        if done.returncode == 0 and done.stdout.strip() == "(3, 12)":
            return str(candidate)
    return None


def sam_cli() -> str | None:
    """The SAM CLI: ``make sam-cli``'s tool venv first, then PATH."""
    venv_sam = ROOT / ".venv" / "tools" / "sam" / "bin" / "sam"
    if venv_sam.exists():
        return str(venv_sam)
    return shutil.which("sam")


def sam_build_command(sam: str, build_dir: Path, cache_dir: Path) -> list[str]:
    """``sam build`` of the template into ``build_dir``, without reusing an earlier build."""
    return [
        sam,
        "build",
        "--no-cached",
        "--build-dir",
        str(build_dir),
        "--cache-dir",
        str(cache_dir),
        "--template-file",
        str(ROOT / "template.yaml"),
    ]


def sam_env(extra_path: str | None = None) -> dict[str, str]:
    """This process's environment for a SAM CLI command: no telemetry, ``extra_path`` first
    on PATH (where python3.12 is, for ``sam build``)."""
    env = dict(os.environ)
    env["SAM_CLI_TELEMETRY"] = "0"
    if extra_path:
        env["PATH"] = f"{extra_path}{os.pathsep}{env.get('PATH', '')}"
    return env
