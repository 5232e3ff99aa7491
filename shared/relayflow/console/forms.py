"""The "run" form of a workflow, generated from its ``input_schema``.

An object schema gets one field per property: a text box for strings (a select for an
``enum``), a number box for integers and numbers, a checkbox for booleans, and a JSON box for
anything nested. A workflow without a schema (or whose schema is not an object) gets one JSON
box for the whole input. The API checks the input against the schema again when the run
starts, and its ``invalid_input`` pointers are shown beside the fields they name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from html import escape
from typing import Any

#: The form field of the whole input as JSON (no schema, or not an object schema).
RAW_FIELD = "input_json"
FIELD_PREFIX = "in."


@dataclass(frozen=True)
class Field:
    name: str
    kind: str  # string, integer, number, boolean, enum, json
    required: bool
    title: str
    description: str
    default: Any = None
    options: tuple[Any, ...] = ()


def fields_of(schema: Any) -> list[Field] | None:
    """The form fields of an object schema; ``None`` when the input is one JSON box."""
    if not isinstance(schema, Mapping) or not isinstance(schema.get("properties"), Mapping):
        return None
    required = set(schema.get("required") or [])
    fields = []
    for name, prop in schema["properties"].items():
        prop = prop if isinstance(prop, Mapping) else {}
        kind = prop.get("type")
        if isinstance(prop.get("enum"), list) and prop["enum"]:
            kind = "enum"
        elif kind not in ("string", "integer", "number", "boolean"):
            kind = "json"
        fields.append(
            Field(
                name=str(name),
                kind=str(kind),
                required=name in required,
                title=str(prop.get("title") or name),
                description=str(prop.get("description") or ""),
                default=prop.get("default"),
                options=tuple(prop.get("enum") or ()),
            )
        )
    return fields


def render_fields(
    schema: Any, values: Mapping[str, str] | None = None, errors: Mapping[str, str] | None = None
) -> str:
    """The form's input fields (``values``: what was sent, kept after a refusal; ``errors``:
    message by JSON pointer, ``""`` for the input itself)."""
    values, errors = values or {}, errors or {}
    fields = fields_of(schema)
    if fields is None:
        text = values.get(RAW_FIELD, "{}")
        return (
            f'<label for="{RAW_FIELD}">Input (JSON)</label>'
            f'<textarea id="{RAW_FIELD}" name="{RAW_FIELD}" rows="6">{escape(text)}</textarea>'
            + _error(errors.get(""))
        )
    parts = [_error(errors.get(""))] if errors.get("") else []
    for field in fields:
        name = FIELD_PREFIX + field.name
        ident = "f-" + field.name
        sent = values.get(name)
        label = escape(field.title) + (' <span class="req">*</span>' if field.required else "")
        parts.append(f'<div class="field"><label for="{escape(ident)}">{label}</label>')
        if field.kind == "boolean":
            checked = (sent is not None) if values else bool(field.default)
            parts.append(
                f'<input type="checkbox" id="{escape(ident)}" name="{escape(name)}"'
                + (" checked" if checked else "")
                + ">"
            )
        elif field.kind == "enum":
            chosen = sent if sent is not None else _text(field.default)
            options = "".join(
                f'<option value="{escape(_text(o))}"'
                + (" selected" if _text(o) == chosen else "")
                + f">{escape(_text(o))}</option>"
                for o in field.options
            )
            blank = "" if field.required else '<option value=""></option>'
            parts.append(
                f'<select id="{escape(ident)}" name="{escape(name)}">{blank}{options}</select>'
            )
        elif field.kind == "json":
            text = sent if sent is not None else _json_text(field.default)
            parts.append(
                f'<textarea id="{escape(ident)}" name="{escape(name)}" rows="3" '
                f'placeholder="JSON">{escape(text)}</textarea>'
            )
        else:
            kind = "number" if field.kind in ("integer", "number") else "text"
            step = ' step="1"' if field.kind == "integer" else ' step="any"' * (kind == "number")
            text = sent if sent is not None else _text(field.default)
            parts.append(
                f'<input type="{kind}"{step} id="{escape(ident)}" name="{escape(name)}" '
                f'value="{escape(text)}">'
            )
        if field.description:
            parts.append(f'<small class="hint">{escape(field.description)}</small>')
        parts.append(_error(errors.get("/" + field.name.replace("~", "~0").replace("/", "~1"))))
        parts.append("</div>")
    return "".join(parts)


def parse_input(schema: Any, form: Mapping[str, str]) -> tuple[Any, dict[str, str]]:
    """The run input a submitted form describes, and the fields it could not read (message by
    JSON pointer). Empty optional fields are left out; the API checks the rest."""
    fields = fields_of(schema)
    if fields is None:
        text = form.get(RAW_FIELD, "").strip() or "{}"
        try:
            return json.loads(text), {}
        except json.JSONDecodeError as exc:
            return None, {"": f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"}
    result: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for field in fields:
        pointer = "/" + field.name.replace("~", "~0").replace("/", "~1")
        raw = form.get(FIELD_PREFIX + field.name)
        if field.kind == "boolean":
            result[field.name] = raw is not None
            continue
        if raw is None or raw.strip() == "":
            continue
        try:
            result[field.name] = _convert(field, raw)
        except ValueError as exc:
            errors[pointer] = str(exc)
    return result, errors


def _convert(field: Field, raw: str) -> Any:
    if field.kind == "integer":
        try:
            return int(raw.strip())
        except ValueError:
            raise ValueError(f"{raw!r} is not a whole number") from None
    if field.kind == "number":
        try:
            number = float(raw.strip())
        except ValueError:
            raise ValueError(f"{raw!r} is not a number") from None
        return int(number) if number.is_integer() and "." not in raw else number
    if field.kind == "json":
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON: {exc.msg}") from None
    if field.kind == "enum":
        for option in field.options:
            if _text(option) == raw:
                return option
        raise ValueError(f"{raw!r} is not one of the options")
    return raw


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def _json_text(value: Any) -> str:
    return "" if value is None else json.dumps(value, indent=2)


def _error(message: str | None) -> str:
    return f'<p class="field-error">{escape(message)}</p>' if message else ""
