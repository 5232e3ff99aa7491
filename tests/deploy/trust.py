"""IAM's decision on an ``sts:AssumeRole`` request against a role's trust policy, enough to
test TenantStepRole's offline: the principal (``Principal`` by account root, bare account id
or exact ARN, or ``*``), the actions (``sts:AssumeRole``, and ``sts:TagSession`` when the
request carries session tags), and the conditions on the request context (``aws:PrincipalArn``,
``aws:PrincipalAccount``, ``aws:RequestTag/<key>``, ``aws:TagKeys``) with the string and ARN
operators, their ``Not``, ``IfExists``, ``ForAllValues:`` and ``ForAnyValue:`` forms (the
wildcards and conditions are :mod:`iam_eval`'s, the identity-policy evaluator's). An explicit
Deny wins; without a matching Allow the request is denied. An operator or key this module
does not know fails the test rather than being guessed at.

A same-account principal also needs its own policy's ``sts:AssumeRole`` on the role; this
checks the other half, the trust policy, which is what decides for every principal whose own
policy is broad (an administrator, ``sts:AssumeRole`` on ``*``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from iam_eval import Request, condition, wildcard

#: The operators a trust policy here may use (without ``IfExists`` and the set qualifiers).
_OPERATORS = frozenset(
    {"StringEquals", "StringNotEquals", "StringLike", "StringNotLike"}
    | {"ArnEquals", "ArnNotEquals", "ArnLike", "ArnNotLike"}
)
#: The request-context keys an ``AssumeRole`` call carries here.
_KNOWN_KEYS = ("aws:principalarn", "aws:principalaccount", "aws:tagkeys", "aws:requesttag/")


@dataclass(frozen=True)
class AssumeRequest:
    """One ``AssumeRole`` call: who makes it and the session tags it passes."""

    principal_arn: str
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def account(self) -> str:
        return self.principal_arn.split(":")[4]

    def context(self) -> dict[str, list[str]]:
        """The request context's keys (lower case, as IAM compares key names), each a list."""
        found = {
            "aws:principalarn": [self.principal_arn],
            "aws:principalaccount": [self.account],
        }
        if self.tags:
            found["aws:tagkeys"] = list(self.tags)
        for key, value in self.tags.items():
            found[f"aws:requesttag/{key}".lower()] = [value]
        return found


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _principal_matches(principal: Any, request: AssumeRequest) -> bool:
    if principal == "*":
        return True
    if not isinstance(principal, dict):
        raise ValueError(f"unknown Principal form {principal!r}")
    for kind, values in principal.items():
        if kind != "AWS":
            continue  # Service, Federated: never an IAM principal's call
        for value in _as_list(values):
            if value == "*":
                return True
            if re.fullmatch(r"\d{12}", value) or value.endswith(":root"):
                account = value if value.isdigit() else value.split(":")[4]
                if account == request.account:
                    return True
            elif value == request.principal_arn:
                return True
    return False


def _condition_holds(operator: str, key: str, patterns: Any, request: AssumeRequest) -> bool:
    qualifier, _, name = operator.rpartition(":")
    if name.removesuffix("IfExists") not in _OPERATORS:
        raise ValueError(f"operator {operator!r} is not known to this checker")
    if qualifier not in ("", "ForAllValues", "ForAnyValue"):
        raise ValueError(f"operator {operator!r} is not known to this checker")
    if not key.lower().startswith(_KNOWN_KEYS):
        raise ValueError(f"condition key {key!r} is not known to this checker")
    context = {
        name: values if name == "aws:tagkeys" else values[0]
        for name, values in request.context().items()
    }
    return condition(operator, key, patterns, Request("sts:AssumeRole", "", context))


def _statement_applies(statement: dict[str, Any], action: str, request: AssumeRequest) -> bool:
    if "NotPrincipal" in statement or "NotAction" in statement:
        raise ValueError("NotPrincipal and NotAction are not known to this checker")
    if not any(wildcard(a, action, fold=True) for a in _as_list(statement["Action"])):
        return False
    if not _principal_matches(statement["Principal"], request):
        return False
    return all(
        _condition_holds(operator, key, patterns, request)
        for operator, block in (statement.get("Condition") or {}).items()
        for key, patterns in block.items()
    )


def _decide(document: dict[str, Any], action: str, request: AssumeRequest) -> bool:
    allowed = False
    for statement in _as_list(document["Statement"]):
        if not _statement_applies(statement, action, request):
            continue
        if statement["Effect"] == "Deny":
            return False
        allowed = allowed or statement["Effect"] == "Allow"
    return allowed


def trust_allows(document: dict[str, Any], request: AssumeRequest) -> bool:
    """Whether the trust policy ``document`` (resolved) lets ``request`` assume the role: it
    must allow ``sts:AssumeRole``, and ``sts:TagSession`` too when tags are passed."""
    actions = ["sts:AssumeRole", *(["sts:TagSession"] if request.tags else [])]
    return all(_decide(document, action, request) for action in actions)
