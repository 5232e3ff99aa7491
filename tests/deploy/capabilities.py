"""What CloudFormation makes a deploy acknowledge, derived from the template it receives.

The rules are CloudFormation's (CreateStack / CreateChangeSet, ``Capabilities``):

- a template holding IAM resources needs ``CAPABILITY_IAM`` or ``CAPABILITY_NAMED_IAM``; one
  whose IAM resources carry a custom name (``RoleName``, ``ManagedPolicyName``, ...) needs
  ``CAPABILITY_NAMED_IAM``, which covers unnamed ones too;
- ``CAPABILITY_AUTO_EXPAND`` is needed to create a stack directly from a template with macros,
  and for nested stacks with macros; ``sam deploy`` always goes through a change set, where the
  ``AWS::Serverless`` transform needs no acknowledgement, so only nested applications
  (``AWS::Serverless::Application``, ``AWS::CloudFormation::Stack``) and macros other than
  CloudFormation's own transforms call for it.
"""

from __future__ import annotations

from typing import Any

IAM_TYPES = frozenset(
    {
        "AWS::IAM::AccessKey",
        "AWS::IAM::Group",
        "AWS::IAM::InstanceProfile",
        "AWS::IAM::ManagedPolicy",
        "AWS::IAM::Policy",
        "AWS::IAM::Role",
        "AWS::IAM::User",
        "AWS::IAM::UserToGroupAddition",
    }
)
# The property that gives each IAM type its physical name.
CUSTOM_NAME = {
    "AWS::IAM::Group": "GroupName",
    "AWS::IAM::InstanceProfile": "InstanceProfileName",
    "AWS::IAM::ManagedPolicy": "ManagedPolicyName",
    "AWS::IAM::Role": "RoleName",
    "AWS::IAM::User": "UserName",
}
NESTED_TYPES = frozenset({"AWS::Serverless::Application", "AWS::CloudFormation::Stack"})
HOSTED_TRANSFORMS = frozenset(
    {"AWS::Serverless-2016-10-31", "AWS::LanguageExtensions", "AWS::Include"}
)


def _transforms(template: dict[str, Any]) -> list[str]:
    """Every macro the template names: its ``Transform`` section and each ``Fn::Transform``."""
    value = template.get("Transform", [])
    found = [value] if isinstance(value, str) else list(value)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            inline = node.get("Fn::Transform")
            if isinstance(inline, dict) and isinstance(inline.get("Name"), str):
                found.append(inline["Name"])
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(template.get("Resources", {}))
    return found


def required_capabilities(source: dict[str, Any], translated: dict[str, Any]) -> set[str]:
    """The capabilities a ``sam deploy`` of ``source`` (as written) must grant; ``translated``
    is what SAM makes of it (the roles SAM generates for functions appear only there)."""
    needed: set[str] = set()
    resources = {**source.get("Resources", {}), **translated.get("Resources", {})}
    iam = {name: r for name, r in resources.items() if r.get("Type") in IAM_TYPES}
    named = [
        name for name, r in iam.items() if CUSTOM_NAME.get(r["Type"]) in (r.get("Properties") or {})
    ]
    if named:
        needed.add("CAPABILITY_NAMED_IAM")
    elif iam:
        needed.add("CAPABILITY_IAM")
    nested = any(r.get("Type") in NESTED_TYPES for r in resources.values())
    macros = [t for t in _transforms(source) if t not in HOSTED_TRANSFORMS]
    if nested or macros:
        needed.add("CAPABILITY_AUTO_EXPAND")
    return needed


def named_iam_resources(translated: dict[str, Any]) -> list[str]:
    """The logical ids of IAM resources with a custom name (why NAMED_IAM is needed)."""
    return sorted(
        name
        for name, r in translated.get("Resources", {}).items()
        if CUSTOM_NAME.get(r.get("Type", "")) in (r.get("Properties") or {})
    )
