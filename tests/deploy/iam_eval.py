"""A small IAM policy evaluator for the policy tests: one identity's statements, one request.

It follows the documented evaluation logic for a single identity policy: an explicit Deny
wins, then an Allow, else the request is implicitly denied. A statement matches when its
``Action``/``NotAction``, ``Resource``/``NotResource`` and every ``Condition`` match; policy
variables (``${aws:PrincipalTag/…}`` and any other request key) are substituted in resources
and condition values, and a variable the request lacks makes its element match nothing.
Wildcards are IAM's: ``*`` is any run of characters (``/`` included), ``?`` one character;
actions compare case-insensitively, resources and string conditions case-sensitively.

Condition operators: the String and Arn families (``StringEquals``, ``StringNotEquals``,
``StringEqualsIgnoreCase``, ``StringLike``, ``StringNotLike``, ``ArnEquals``, ``ArnLike``,
``ArnNotEquals``, ``ArnNotLike``), ``Bool``, ``Null``, each with ``…IfExists``, and the
``ForAllValues:``/``ForAnyValue:`` set qualifiers. Any other operator raises: a policy the
evaluator cannot read is never reported as allowing or denying.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

Decision = Literal["Allow", "Deny", "ImplicitDeny"]
Context = Mapping[str, str | list[str]]

_VARIABLE = re.compile(r"\$\{([^}]+)\}")


@dataclass(frozen=True)
class Request:
    """One API call: the action, the resource's ARN, and the request context (condition
    keys: ``aws:PrincipalTag/…``, ``aws:ResourceTag/…``, ``dynamodb:LeadingKeys`` …; a
    multivalued key is a list)."""

    action: str
    resource: str
    context: Context = field(default_factory=dict)


def as_tenant(tenant: str, action: str, resource: str, **keys: str | list[str]) -> Request:
    """A request by a session tagged ``relayflow-tenant=<tenant>``; ``keys`` are further
    condition keys by their short names (``resource_tag``: ``aws:ResourceTag/relayflow-tenant``,
    ``leading_keys``: ``dynamodb:LeadingKeys``, ``s3_prefix``: ``s3:prefix``)."""
    context: dict[str, str | list[str]] = {"aws:PrincipalTag/relayflow-tenant": tenant}
    for name, value in keys.items():
        context[_SHORT_KEYS[name]] = value
    return Request(action, resource, context)


#: The short names :func:`as_tenant` takes for the condition keys the template uses.
_SHORT_KEYS = {
    "resource_tag": "aws:ResourceTag/relayflow-tenant",
    "leading_keys": "dynamodb:LeadingKeys",
    "s3_prefix": "s3:prefix",
}


def evaluate(statements: list[dict[str, Any]], request: Request) -> Decision:
    """Deny if a Deny statement matches, else Allow if an Allow does, else ImplicitDeny."""
    allowed = False
    for statement in statements:
        if not matches(statement, request):
            continue
        if statement["Effect"] == "Deny":
            return "Deny"
        if statement["Effect"] == "Allow":
            allowed = True
        else:
            raise ValueError(f"unknown Effect {statement['Effect']!r}")
    return "Allow" if allowed else "ImplicitDeny"


def allowed(statements: list[dict[str, Any]], request: Request) -> bool:
    return evaluate(statements, request) == "Allow"


def matches(statement: Mapping[str, Any], request: Request) -> bool:
    """Whether ``statement`` applies to ``request`` (its effect aside)."""
    if "Action" in statement:
        if not any(wildcard(a, request.action, fold=True) for a in _listed(statement["Action"])):
            return False
    elif "NotAction" in statement:
        if any(wildcard(a, request.action, fold=True) for a in _listed(statement["NotAction"])):
            return False
    else:
        raise ValueError(f"statement without Action or NotAction: {statement}")
    if "Resource" in statement:
        if not any(_resource(r, request) for r in _listed(statement["Resource"])):
            return False
    elif "NotResource" in statement:
        if any(_resource(r, request) for r in _listed(statement["NotResource"])):
            return False
    else:
        raise ValueError(f"statement without Resource or NotResource: {statement}")
    return all(
        condition(operator, key, values, request)
        for operator, block in (statement.get("Condition") or {}).items()
        for key, values in block.items()
    )


def substitute(text: str, context: Context) -> str | None:
    """``text`` with its policy variables replaced from ``context``; ``None`` when one is
    missing or multivalued (``${*}``, ``${?}``, ``${$}`` are the escaped characters)."""
    missing = False

    def replace(match: re.Match[str]) -> str:
        nonlocal missing
        name = match.group(1)
        if name in ("*", "?", "$"):
            return "\0" + name  # a literal character, not a wildcard
        value = context.get(name)
        if not isinstance(value, str):
            missing = True
            return ""
        return value

    replaced = _VARIABLE.sub(replace, text)
    return None if missing else replaced


def wildcard(pattern: str, value: str, *, fold: bool = False) -> bool:
    """IAM's ``*``/``?`` match (``\\0`` marks an escaped, literal character)."""
    return _compiled(pattern, fold).fullmatch(value) is not None


@cache
def _compiled(pattern: str, fold: bool) -> re.Pattern[str]:
    parts: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\0":
            parts.append(re.escape(pattern[index + 1]))
            index += 2
            continue
        parts.append(".*" if char == "*" else "." if char == "?" else re.escape(char))
        index += 1
    return re.compile("".join(parts), re.DOTALL | (re.IGNORECASE if fold else 0))


def _resource(pattern: str, request: Request) -> bool:
    resolved = substitute(pattern, request.context)
    return resolved is not None and wildcard(resolved, request.resource)


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


# --------------------------------------------------------------------------- conditions

_STRING_OPERATORS = {
    "StringEquals": (lambda p, v: p == v, False),
    "StringNotEquals": (lambda p, v: p == v, True),
    "StringEqualsIgnoreCase": (lambda p, v: p.lower() == v.lower(), False),
    "StringNotEqualsIgnoreCase": (lambda p, v: p.lower() == v.lower(), True),
    "StringLike": (lambda p, v: wildcard(p, v), False),
    "StringNotLike": (lambda p, v: wildcard(p, v), True),
    "ArnEquals": (lambda p, v: p == v, False),
    "ArnNotEquals": (lambda p, v: p == v, True),
    "ArnLike": (lambda p, v: wildcard(p, v), False),
    "ArnNotLike": (lambda p, v: wildcard(p, v), True),
    "Bool": (lambda p, v: p.lower() == v.lower(), False),
}


def condition(operator: str, key: str, values: Any, request: Request) -> bool:
    """One condition key under one operator: the key's value against the listed values
    (any of them)."""
    qualifier, _, name = operator.rpartition(":")
    if_exists = name.endswith("IfExists")
    name = name.removesuffix("IfExists")
    # Condition key names compare without case (aws:PrincipalArn is aws:principalarn).
    found = {name.lower(): value for name, value in request.context.items()}
    present = key.lower() in found
    actual = found.get(key.lower())
    patterns = [str(v).lower() if isinstance(v, bool) else str(v) for v in _listed(values)]
    if name == "Null":
        if qualifier or if_exists:
            raise ValueError(f"unsupported operator {operator!r}")
        return all((p.lower() == "true") is (not present) for p in patterns)
    if name not in _STRING_OPERATORS:
        raise ValueError(f"unsupported operator {operator!r}")
    compare, negated = _STRING_OPERATORS[name]
    resolved = [r for p in patterns if (r := substitute(p, request.context)) is not None]

    def one(value: str) -> bool:
        hit = any(compare(pattern, value) for pattern in resolved)
        return not hit if negated else hit

    if qualifier == "ForAllValues":
        # Holds for a missing or empty key: hence the Null checks beside it.
        return all(one(v) for v in _listed(actual or []))
    if qualifier == "ForAnyValue":
        return any(one(v) for v in _listed(actual or []))
    if qualifier:
        raise ValueError(f"unsupported operator {operator!r}")
    if not present:
        return if_exists or negated
    if not isinstance(actual, str):
        raise ValueError(f"{key} is multivalued: use ForAllValues or ForAnyValue")
    return one(actual)
