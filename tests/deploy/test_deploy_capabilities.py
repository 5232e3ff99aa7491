"""`sam deploy` grants exactly the capabilities CloudFormation will ask for.

Nothing offline checks capabilities (moto, cfn-lint, checkov and ``sam validate`` ignore them),
so a template that gains a named role deploys nowhere until someone reads CreateChangeSet's
``InsufficientCapabilities``. The capabilities are derived here from the template as each
environment deploys it (``capabilities.py``) and compared with samconfig.toml and the docs.
"""

from __future__ import annotations

import re
import tomllib

import pytest
from capabilities import named_iam_resources, required_capabilities
from sam_template import ROOT, load_template
from translated import translate

ENVIRONMENTS = ("dev", "prod")


def _deploy_parameters(env: str) -> dict[str, object]:
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    return config[env]["deploy"]["parameters"]


def _overrides(text: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', text))


def _granted(env: str) -> set[str]:
    value = _deploy_parameters(env)["capabilities"]
    return set(value.split()) if isinstance(value, str) else set(value)


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_samconfig_grants_what_the_template_needs(env):
    # Given the template as this environment deploys it
    overrides = _overrides(str(_deploy_parameters(env)["parameter_overrides"]))
    translated = translate(**overrides)
    needed = required_capabilities(load_template(), translated)
    # Then samconfig grants exactly that: nothing missing (the deploy is refused), nothing extra
    assert _granted(env) == needed, (
        f"{env}: samconfig grants {sorted(_granted(env))}, the template needs {sorted(needed)} "
        f"(named IAM resources: {named_iam_resources(translated)})"
    )


def test_operations_doc_names_the_granted_capabilities():
    granted = set().union(*(_granted(env) for env in ENVIRONMENTS))
    text = (ROOT / "docs" / "operations.md").read_text()
    named = set(re.findall(r"CAPABILITY_[A-Z_]+", text))
    assert named == granted


def test_a_named_role_needs_named_iam():
    source = {"Resources": {}}
    unnamed = {"Resources": {"R": {"Type": "AWS::IAM::Role", "Properties": {}}}}
    named = {"Resources": {"R": {"Type": "AWS::IAM::Role", "Properties": {"RoleName": "r"}}}}
    policy = {
        "Resources": {
            "P": {"Type": "AWS::IAM::ManagedPolicy", "Properties": {"ManagedPolicyName": "p"}}
        }
    }
    assert required_capabilities(source, {"Resources": {}}) == set()
    assert required_capabilities(source, unnamed) == {"CAPABILITY_IAM"}
    assert required_capabilities(source, named) == {"CAPABILITY_NAMED_IAM"}
    assert required_capabilities(source, policy) == {"CAPABILITY_NAMED_IAM"}


def test_nested_applications_and_foreign_macros_need_auto_expand():
    sam_only = {"Transform": "AWS::Serverless-2016-10-31", "Resources": {}}
    assert required_capabilities(sam_only, {"Resources": {}}) == set()
    nested = {"Resources": {"App": {"Type": "AWS::Serverless::Application", "Properties": {}}}}
    assert required_capabilities(nested, {"Resources": {}}) == {"CAPABILITY_AUTO_EXPAND"}
    macro = {
        "Transform": ["AWS::Serverless-2016-10-31", "MyMacro"],
        "Resources": {},
    }
    assert required_capabilities(macro, {"Resources": {}}) == {"CAPABILITY_AUTO_EXPAND"}
    inline = {
        "Resources": {
            "Q": {"Type": "AWS::SQS::Queue", "Properties": {"Fn::Transform": {"Name": "Other"}}}
        }
    }
    assert required_capabilities(inline, {"Resources": {}}) == {"CAPABILITY_AUTO_EXPAND"}
