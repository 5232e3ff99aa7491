"""Translation of a subset of CEL and templates to native ASL (JSONPath query language).

What translates costs nothing at run time: no Lambda is invoked. Everything else returns
``None`` and the compiler falls back to a Lambda that evaluates CEL. The translation
analyses celpy's parse tree; it never evaluates the expression against data.

Semantics agree with CEL whenever CEL evaluates without error (apart from celpy treating
``true`` as the number 1). Where CEL raises (a type mismatch such as ``"abc" > 3``), a
native Choice rule is simply false; a missing path fails the run in both (see
docs/expressions.md).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from relayflow.expressions.cel import (
    FACTS_CACHE_SIZE,
    expression_jsonpath,
    literal_value,
    parse,
    unwrap,
)
from relayflow.expressions.cel import plain_jsonpath as _jsonpath
from relayflow.expressions.templates import Placeholder, parse_template, single_placeholder

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_RELATIONS = {
    "relation_lt": "<",
    "relation_le": "<=",
    "relation_gt": ">",
    "relation_ge": ">=",
    "relation_eq": "==",
    "relation_ne": "!=",
    "relation_in": "in",
}
_SUFFIX = {
    "==": "Equals",
    "<": "LessThan",
    "<=": "LessThanEquals",
    ">": "GreaterThan",
    ">=": "GreaterThanEquals",
}
_PREFIX = {"int": "Numeric", "double": "Numeric", "string": "String"}


# --------------------------------------------------------------------------- paths


# --------------------------------------------------------------------------- Choice rules


def condition_to_choice(src: str) -> dict[str, Any] | None:
    """An ASL Choice rule (without ``Next``) equivalent to the CEL condition, or None.

    Raises ExpressionSyntaxError when ``src`` does not parse.
    """
    return copy.deepcopy(_choice(src))  # the caller owns its rule (it adds ``Next``)


@lru_cache(maxsize=FACTS_CACHE_SIZE)
def _choice(src: str) -> dict[str, Any] | None:
    return _rule(parse(src))


def _rule(node: Any) -> dict[str, Any] | None:
    node = unwrap(node)
    data = getattr(node, "data", None)
    if data in ("conditionalor", "conditionaland") and len(node.children) == 2:
        return _combine("Or" if data == "conditionalor" else "And", node.children)
    if data == "unary" and len(node.children) == 2 and node.children[0].data == "unary_not":
        return _negate(_rule(node.children[1]))
    if data == "relation" and len(node.children) == 2:
        return _relation(node)
    if data == "ident_arg":
        return _has(node)
    if data == "member_dot_arg":
        return _string_match(node)
    path = _jsonpath(node)
    if path is not None:
        return {"Variable": path, "BooleanEquals": True}
    return None


def _combine(kind: str, operands: list[Any]) -> dict[str, Any] | None:
    rules: list[dict[str, Any]] = []
    for operand in operands:
        rule = _rule(operand)
        if rule is None:
            return None
        rules.extend(rule[kind] if list(rule) == [kind] else [rule])
    return {kind: rules}


def _negate(rule: dict[str, Any] | None) -> dict[str, Any] | None:
    if rule is None:
        return None
    if list(rule) == ["Not"]:
        return rule["Not"]
    return {"Not": rule}


def _relation(node: Any) -> dict[str, Any] | None:
    operator_node, right = node.children
    operator = _RELATIONS[operator_node.data]
    left = operator_node.children[0]
    if operator == "in":
        return _membership(left, right)
    path, literal = _jsonpath(left), literal_value(right)
    if path is None or literal is None:
        path, literal = _jsonpath(right), literal_value(left)
        operator = _FLIPPED[operator]
    if path is None or literal is None:
        return None
    return _compare(path, operator, *literal)


def _compare(path: str, operator: str, kind: str, value: Any) -> dict[str, Any] | None:
    if operator == "!=":
        return None if kind == "null" else _negate(_compare(path, "==", kind, value))
    if kind == "null":
        return {"Variable": path, "IsNull": True} if operator == "==" else None
    if kind == "bool":
        return {"Variable": path, "BooleanEquals": value} if operator == "==" else None
    return {"Variable": path, f"{_PREFIX[kind]}{_SUFFIX[operator]}": value}


def _membership(left: Any, right: Any) -> dict[str, Any] | None:
    """``path in [lit, lit]`` with literals of one kind: an Or of equality rules."""
    path = _jsonpath(left)
    right = unwrap(right)
    if path is None or getattr(right, "data", None) != "list_lit" or not right.children:
        return None
    literals: list[tuple[str, Any]] = []
    for element in right.children[0].children:
        literal = literal_value(element)
        if literal is None or literal[0] == "null":
            return None
        literals.append(literal)
    if len({kind for kind, _ in literals}) != 1:
        return None
    rules = [{"Variable": path, _equality(kind): value} for kind, value in literals]
    return rules[0] if len(rules) == 1 else {"Or": rules}


def _equality(kind: str) -> str:
    return "BooleanEquals" if kind == "bool" else f"{_PREFIX[kind]}Equals"


def _has(node: Any) -> dict[str, Any] | None:
    if str(node.children[0]) != "has" or len(node.children) != 2:
        return None
    args = node.children[1].children
    if len(args) != 1 or getattr(unwrap(args[0]), "data", None) != "member_dot":
        return None
    path = _jsonpath(args[0])
    return None if path is None else {"Variable": path, "IsPresent": True}


def _string_match(node: Any) -> dict[str, Any] | None:
    method = str(node.children[1])
    if method not in ("startsWith", "endsWith", "contains") or len(node.children) != 3:
        return None
    args = node.children[2].children
    path = _jsonpath(node.children[0])
    literal = literal_value(args[0]) if len(args) == 1 else None
    if path is None or literal is None or literal[0] != "string":
        return None
    text = literal[1].replace("\\", "\\\\").replace("*", "\\*")
    pattern = {"startsWith": f"{text}*", "endsWith": f"*{text}", "contains": f"*{text}*"}[method]
    return {"Variable": path, "StringMatches": pattern}


# --------------------------------------------------------------------------- Parameters


class _NotNative(Exception):
    """Raised inside the Parameters translation when some part has no native form."""


def template_to_parameters(value: Any) -> dict[str, Any] | None:
    """ASL ``Parameters`` producing the same value as ``render(value, doc)``, or None.

    ``value`` must be a dict. Literals are copied (escapes resolved); a string that is one
    plain-path placeholder becomes ``"key.$": "$.path"``; text mixing literals and
    plain-path placeholders becomes ``States.Format`` (``{``, ``}``, ``\\`` escaped); a list
    with placeholders becomes ``States.Array`` when every element is a plain-path
    placeholder, an integer, or a string without ``{``, ``}`` or ``\\``. Anything else
    (other expressions, ``'`` in literal text, a user key ending in ``.$``) gives None.
    Raises TemplateSyntaxError/ExpressionSyntaxError on bad templates.
    """
    if not isinstance(value, Mapping):
        return None
    try:
        return _parameters(value)
    except _NotNative:
        return None


def _parameters(value: Mapping[Any, Any]) -> dict[str, Any]:
    parameters: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str) or key.endswith(".$"):
            raise _NotNative
        if isinstance(item, Mapping):
            parameters[key] = _parameters(item)
        elif isinstance(item, str) and _has_placeholders(item):
            parameters[f"{key}.$"] = _string_parameter(item)
        elif isinstance(item, list | tuple) and _has_placeholders(item):
            parameters[f"{key}.$"] = _states_array(item)
        else:
            parameters[key] = _literal_copy(item)
    return parameters


def _plain_path(expression: str) -> str:
    path = expression_jsonpath(expression)
    if path is None:
        raise _NotNative
    return path


def _string_parameter(text: str) -> str:
    parts = parse_template(text)
    single = single_placeholder(parts)
    if single is not None:
        return _plain_path(single.expression)
    pattern: list[str] = []
    arguments: list[str] = []
    for part in parts:
        if isinstance(part, Placeholder):
            pattern.append("{}")
            arguments.append(_plain_path(part.expression))
        else:
            pattern.append(_intrinsic_text(part))
    return f"States.Format('{''.join(pattern)}', {', '.join(arguments)})"


def _states_array(items: list[Any] | tuple[Any, ...]) -> str:
    arguments: list[str] = []
    for item in items:
        if isinstance(item, int) and not isinstance(item, bool):
            # Integers only: moto 5.2.5's intrinsic parser crashes on float literals.
            arguments.append(str(item))
        elif isinstance(item, str):
            single = single_placeholder(parse_template(item))
            if single is not None:
                arguments.append(_plain_path(single.expression))
            elif _has_placeholders(item):
                raise _NotNative
            else:
                text = _literal_copy(item)
                # moto keeps intrinsic escapes inside States.Array strings (only States.Format
                # is patched locally), so strings that would need one are not native here.
                if any(char in text for char in "{}\\"):
                    raise _NotNative
                arguments.append(f"'{_intrinsic_text(text)}'")
        else:
            raise _NotNative
    return f"States.Array({', '.join(arguments)})"


def _intrinsic_text(text: str) -> str:
    """``text`` as the inside of an intrinsic string literal: ``{``, ``}`` and ``\\`` take a
    backslash. ``'`` is refused: moto's intrinsic lexer mishandles ``\\'``."""
    if "'" in text:
        raise _NotNative
    return text.replace("\\", "\\\\").replace("{", "\\{").replace("}", "\\}")


def _has_placeholders(value: Any) -> bool:
    if isinstance(value, str):
        return any(isinstance(part, Placeholder) for part in parse_template(value))
    if isinstance(value, Mapping):
        return any(_has_placeholders(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_has_placeholders(item) for item in value)
    return False


def _literal_copy(value: Any) -> Any:
    """A placeholder-free value with escapes resolved; a key ending in ``.$`` is refused."""
    if isinstance(value, str):
        return "".join(str(part) for part in parse_template(value))
    if isinstance(value, Mapping):
        if any(not isinstance(key, str) or key.endswith(".$") for key in value):
            raise _NotNative
        return {key: _literal_copy(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_literal_copy(item) for item in value]
    return value
