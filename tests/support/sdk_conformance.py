"""Strict checks of a JSON request against the providers' own request models.

* :func:`typed_problems` checks a value against an official SDK's ``TypedDict`` (the
  ``anthropic`` and ``openai`` packages, dev dependencies only): every required key, no key
  the type does not declare (unless the SDK marks the type ``extra: allow``), no key the SDK
  documents as deprecated, literal values, and every element of every list. pydantic's
  ``TypeAdapter`` is not used: it validates ``Iterable`` fields lazily (a wrong message would
  pass unseen) and the SDKs' unions also accept their response models, whose ``extra:
  allow`` would let any key through.
* :func:`shape_problems` checks a value against a botocore service model shape (Bedrock
  ``Converse``): required members, unknown members, types, ``min``/``max`` (lengths and
  values), ``enum``, ``pattern`` and unions of exactly one member. botocore's own
  ``ParamValidator`` checks neither ``max`` nor ``enum`` nor ``pattern``.

Both return a list of ``"<path>: <problem>"`` strings, empty when the value conforms.
"""

from __future__ import annotations

import ast
import collections.abc as cabc
import functools
import inspect
import re
import textwrap
import types
import typing
from typing import Any

import typing_extensions


def typed_problems(value: Any, hint: Any, path: str = "$") -> list[str]:
    """Problems of ``value`` (plain JSON) against the type ``hint`` of an SDK."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated or origin is typing_extensions.Annotated:
        return typed_problems(value, args[0], path)
    if origin in (typing_extensions.Required, typing_extensions.NotRequired):
        return typed_problems(value, args[0], path)
    if hint is Any or hint is object:
        return []
    if hint is None or hint is type(None):
        return [] if value is None else [f"{path}: must be null"]
    if origin in (typing.Union, types.UnionType):
        return _union_problems(value, args, path)
    if origin in (typing.Literal, typing_extensions.Literal):
        return [] if value in args else [f"{path}: {value!r} is not one of {list(args)}"]
    if typing_extensions.is_typeddict(hint):
        return _typeddict_problems(value, hint, path)
    if hint is str:
        return [] if isinstance(value, str) else [f"{path}: must be a string"]
    if hint is bool:
        return [] if isinstance(value, bool) else [f"{path}: must be a boolean"]
    if hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{path}: must be an integer"]
    if hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return [] if ok else [f"{path}: must be a number"]
    if origin in (dict, cabc.Mapping) or hint is dict:
        if not isinstance(value, dict):
            return [f"{path}: must be an object"]
        item = args[1] if len(args) == 2 else Any
        return [p for k, v in value.items() for p in typed_problems(v, item, f"{path}.{k}")]
    if _is_sequence(hint, origin):
        if not isinstance(value, list):
            return [f"{path}: must be a list"]
        item = args[0] if args else Any
        return [p for i, v in enumerate(value) for p in typed_problems(v, item, f"{path}[{i}]")]
    if isinstance(hint, type) and _is_response_model(hint):
        return [f"{path}: a response model, not a request value"]
    raise TypeError(f"{path}: the checker does not know the type {hint!r}")


def _is_sequence(hint: Any, origin: Any) -> bool:
    if origin in (list, tuple, cabc.Iterable, cabc.Sequence, typing.Iterable, typing.Sequence):
        return True
    # The SDKs' SequenceNotStr[str] is a Protocol: a list of its argument.
    return getattr(origin, "__name__", "") == "SequenceNotStr" or hint is list


def _is_response_model(hint: type) -> bool:
    from pydantic import BaseModel

    return issubclass(hint, BaseModel)


def _union_problems(value: Any, members: tuple[Any, ...], path: str) -> list[str]:
    ranked: list[tuple[tuple[bool, int, int], list[str]]] = []
    for member in members:
        if isinstance(member, type) and _is_response_model(member):
            continue  # the SDKs accept their own response objects; a request is plain JSON
        found = typed_problems(value, member, path)
        if not found:
            return []
        # Report the member the value names (its "type" or "role"), else the one that got
        # furthest into the value: its problems are the useful ones.
        ranked.append(((not _named_by(value, member), -_depth(found), len(found)), found))
    if not ranked:
        return [f"{path}: matches no member of the union"]
    return min(ranked, key=lambda entry: entry[0])[1]


def _named_by(value: Any, member: Any) -> bool:
    if not (isinstance(value, dict) and typing_extensions.is_typeddict(member)):
        return False
    keys = _fields(member)[0]
    for tag in ("type", "role"):
        hint = keys.get(tag)
        while hint is not None and typing.get_origin(hint) in (
            typing_extensions.Required,
            typing_extensions.NotRequired,
            typing.Annotated,
        ):
            hint = typing.get_args(hint)[0]
        if tag in value and typing.get_origin(hint) is typing.Literal:
            return value[tag] in typing.get_args(hint)
    return False


def _depth(problems: list[str]) -> int:
    return max(len(p.split(": ", 1)[0]) for p in problems)


@functools.cache
def _fields(hint: Any) -> tuple[dict[str, Any], frozenset[str], bool]:
    """A TypedDict's wire keys → hints, its required wire keys, and whether it allows
    other keys."""
    hints = typing_extensions.get_type_hints(hint, include_extras=True)
    keys: dict[str, Any] = {}
    required: set[str] = set()
    for name, field_hint in hints.items():
        wire = _alias(field_hint) or name
        keys[wire] = field_hint
        if name in hint.__required_keys__:
            required.add(wire)
    config = getattr(hint, "__pydantic_config__", None) or {}
    return keys, frozenset(required), config.get("extra") == "allow"


def _alias(hint: Any) -> str | None:
    for meta in getattr(hint, "__metadata__", ()):
        alias = getattr(meta, "alias", None)
        if isinstance(alias, str):
            return alias
    return None


def _typeddict_problems(value: Any, hint: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: must be an object ({hint.__name__})"]
    keys, required, extra_allowed = _fields(hint)
    problems = [f"{path}: {hint.__name__} requires {k!r}" for k in sorted(required - set(value))]
    deprecated = deprecated_fields(hint)
    for key, item in value.items():
        if key not in keys:
            if not extra_allowed:
                problems.append(f"{path}: {hint.__name__} has no field {key!r}")
            continue
        if key in deprecated:
            problems.append(f"{path}: {hint.__name__}.{key} is deprecated ({deprecated[key]})")
        problems.extend(typed_problems(item, keys[key], f"{path}.{key}"))
    return problems


_DEPRECATED = re.compile(
    r"^\s*Deprecated\b(?!\s+values).*|\b(?:is|now|been) deprecated\b.*", re.IGNORECASE
)


@functools.cache
def deprecated_fields(hint: Any) -> dict[str, str]:
    """The fields of a TypedDict (and its bases) whose SDK docstring calls them deprecated,
    with the sentence that says so. The SDKs mark deprecation only in the docstring that
    follows the field, so the class's source is read."""
    found: dict[str, str] = {}
    for klass in _typeddict_bases(hint):
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0]
        assert isinstance(body, ast.ClassDef)
        statements = body.body
        for index, node in enumerate(statements[:-1]):
            after = statements[index + 1]
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                doc = str(after.value.value)
                # "Deprecated in favor of …", "This value is now deprecated …"; not
                # "Deprecated values: …" (some values of a live field).
                match = _DEPRECATED.search(doc)
                if match:
                    found[node.target.id] = " ".join(match.group(0).split())[:160]
    return found


def _typeddict_bases(hint: Any) -> list[Any]:
    """``hint`` and the TypedDicts it extends, bases first (a TypedDict's ``__mro__`` does not
    list them)."""
    found: list[Any] = []
    for base in getattr(hint, "__orig_bases__", ()):
        if typing_extensions.is_typeddict(base):
            found += [b for b in _typeddict_bases(base) if b not in found]
    return [*found, hint]


# --------------------------------------------------------------------------- botocore


def shape_problems(value: Any, shape: Any, path: str = "$") -> list[str]:
    """Problems of ``value`` against a botocore ``Shape`` (see the module docstring)."""
    kind = shape.type_name
    meta = shape.metadata
    if getattr(shape, "is_document_type", False):
        return []  # a JSON document: any value
    if kind == "structure":
        if not isinstance(value, dict):
            return [f"{path}: must be an object ({shape.name})"]
        problems = [
            f"{path}: {shape.name} requires {name!r}"
            for name in shape.required_members
            if name not in value
        ]
        problems += [
            f"{path}: {shape.name} has no member {name!r}"
            for name in value
            if name not in shape.members
        ]
        if meta.get("union") and len(value) != 1:
            problems.append(
                f"{path}: {shape.name} is a union: exactly one member, not {len(value)}"
            )
        for name, item in value.items():
            if name in shape.members:
                problems += shape_problems(item, shape.members[name], f"{path}.{name}")
        return problems
    if kind == "list":
        if not isinstance(value, list):
            return [f"{path}: must be a list"]
        problems = _range(len(value), meta, path, "items")
        for index, item in enumerate(value):
            problems += shape_problems(item, shape.member, f"{path}[{index}]")
        return problems
    if kind == "map":
        if not isinstance(value, dict):
            return [f"{path}: must be an object"]
        return [p for k, v in value.items() for p in shape_problems(v, shape.value, f"{path}.{k}")]
    if kind == "string":
        if not isinstance(value, str):
            return [f"{path}: must be a string"]
        problems = _range(len(value), meta, path, "characters")
        if "enum" in meta and value not in meta["enum"]:
            problems.append(f"{path}: {value!r} is not one of {meta['enum']}")
        if "pattern" in meta and not re.fullmatch(meta["pattern"], value):
            problems.append(f"{path}: {value!r} does not match {meta['pattern']}")
        return problems
    if kind in ("integer", "long"):
        if not isinstance(value, int) or isinstance(value, bool):
            return [f"{path}: must be an integer"]
        return _range(value, meta, path, "")
    if kind in ("float", "double"):
        if not isinstance(value, int | float) or isinstance(value, bool):
            return [f"{path}: must be a number"]
        return _range(value, meta, path, "")
    if kind == "boolean":
        return [] if isinstance(value, bool) else [f"{path}: must be a boolean"]
    if kind == "blob":
        return [] if isinstance(value, bytes | str) else [f"{path}: must be bytes"]
    if kind == "timestamp":
        return []
    raise TypeError(f"{path}: the checker does not know the shape type {kind!r}")


def _range(measured: float, meta: dict[str, Any], path: str, unit: str) -> list[str]:
    what = f"{measured} {unit}".strip()
    problems = []
    if "min" in meta and measured < meta["min"]:
        problems.append(f"{path}: {what} is below the minimum {meta['min']}")
    if "max" in meta and measured > meta["max"]:
        problems.append(f"{path}: {what} is above the maximum {meta['max']}")
    return problems


@functools.cache
def bedrock_runtime_model() -> Any:
    """botocore's service model of ``bedrock-runtime`` (the installed botocore's)."""
    import botocore.session

    return botocore.session.get_session().get_service_model("bedrock-runtime")
