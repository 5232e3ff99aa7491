"""pydantic's refusals in the words of the definition format.

pydantic names its own layer (``Extra inputs are not permitted``, ``Input should be a valid
dictionary or instance of SecretRef``, ``String should match pattern '^[a-z]…$'``).
:func:`taught` rewrites those into what the field allows and, where one is near, the fix:
an unknown field gets the closest allowed field names (:func:`allowed_fields` finds the model
that refused it by walking the workflow model along the error's location), a pattern is said
in words, an enum value gets its nearest allowed value.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any

from pydantic import BaseModel

from relayflow.validation.hints import did_you_mean, pattern_in_words


def _unwrap(annotation: Any) -> Any:
    """``Annotated[X, …]`` → ``X``; ``X | None`` → ``X``."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
            continue
        if origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(members) == 1:
                annotation = members[0]
                continue
        return annotation


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _tagged(annotation: Any, tag: str) -> Any:
    """The member of a union of models whose ``type`` literal is ``tag``; else ``None``."""
    for member in typing.get_args(annotation):
        member = _unwrap(member)
        if _is_model(member) and "type" in member.model_fields:
            literal = _unwrap(member.model_fields["type"].annotation)
            if tag in typing.get_args(literal):
                return member
    return None


def _step(annotation: Any, part: Any) -> Any:
    annotation = _unwrap(annotation)
    origin = typing.get_origin(annotation)
    if _is_model(annotation):
        for name, info in annotation.model_fields.items():
            if part in (name, info.alias):
                return info.annotation
        return None
    if origin is dict:
        return typing.get_args(annotation)[1]
    if origin is list:
        return typing.get_args(annotation)[0] if str(part).isdigit() else None
    if origin in (typing.Union, types.UnionType) and isinstance(part, str):
        return _tagged(annotation, part)
    return None


def allowed_fields(root: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names the model at ``loc[:-1]`` (from ``root``) accepts; ``[]`` when the
    location leads nowhere this walk knows."""
    current: Any = root
    for part in loc[:-1]:
        # A tagged union's location holds the tag (steps.charge.tool.tabel): the tag picks
        # the member, as a field name picks the field.
        current = _step(current, part)
        if current is None:
            return []
    model = _unwrap(current)
    if not _is_model(model):
        return []
    return sorted(info.alias or name for name, info in model.model_fields.items())


#: Fields that belong to another step type, and the way this one says it.
REWRITES = {
    ("condition", "on_success"): "a condition routes by its result: use on_true and on_false",
    ("for_each", "steps"): "a for_each runs one step per item: name it with step: <key>",
    ("parallel", "steps"): "a parallel names its branches' first steps: branches: [a, b]",
}


def _quoted(text: str) -> list[str]:
    return re.findall(r"'([^']*)'", text)


def taught(root: type[BaseModel] | None, err: dict[str, Any], message: str) -> str:
    """``message`` (pydantic's, for ``err``) in the definition format's words. ``root`` is the
    model validated (``None`` when unknown: an unknown field then gets no suggestions)."""
    kind, loc, ctx = err["type"], tuple(err["loc"]), err.get("ctx") or {}
    given = err.get("input")
    if kind == "extra_forbidden" and loc:
        name = str(loc[-1])
        step_type = str(loc[2]) if len(loc) >= 4 and loc[0] == "steps" else ""
        rewrite = REWRITES.get((step_type, name))
        if rewrite is not None:
            return f"unknown field '{name}': {rewrite}"
        allowed = allowed_fields(root, loc) if root is not None else []
        return f"unknown field '{name}'" + did_you_mean(name, allowed)
    if kind == "missing" and loc:
        return f"missing required field '{loc[-1]}'"
    if kind == "string_pattern_mismatch" and "pattern" in ctx:
        pattern = str(ctx["pattern"])
        text = f"{given!r} is not allowed here: use {pattern_in_words(pattern)}"
        if isinstance(given, str) and re.fullmatch(pattern, given.lower().replace(" ", "-")):
            text += f"; write {given.lower().replace(' ', '-')!r}"
        return text
    if kind == "literal_error" and isinstance(given, str):
        allowed = _quoted(str(ctx.get("expected", "")))
        hint = did_you_mean(given, allowed)
        if hint.startswith("; did you mean"):
            return f"{given!r} is not one of {ctx.get('expected')}{hint}"
        return f"{given!r} is not one of {ctx.get('expected')}"
    if kind == "model_type" and message.endswith("or none"):
        return "should be a policy (a mapping of its fields) or none"
    if kind == "model_type":
        wanted = str(ctx.get("class_name", ""))
        if wanted == "SecretRef":
            return (
                "a secret is a reference, not its value: write {name: <secret name>} "
                f"(found {type(given).__name__})"
            )
        return f"should be a mapping of fields, not {type(given).__name__}"
    if kind == "int_parsing" and isinstance(given, str):
        digits = re.fullmatch(r"\s*(\d+)\s*s(ec(ond)?s?)?\s*", given)
        fix = f"; write {digits.group(1)}" if digits else ""
        return f"{given!r} is not a whole number (seconds are written as a number){fix}"
    if message.startswith("Input should be "):
        return f"{given!r} should be {message[len('Input should be ') :]}"
    return message
