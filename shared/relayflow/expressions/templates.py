"""Templates: strings with ``{{ expr }}`` placeholders, applied recursively through JSON values.

* A string that is exactly one placeholder (surrounding whitespace ignored) evaluates to
  the expression's value with its JSON type: ``"{{ trigger.amount }}"`` gives ``150``.
* Otherwise each placeholder is rendered into the text: strings as they are, ``null`` as
  ``null``, numbers and booleans in JSON form, objects and lists as compact JSON.
* ``\\{{`` is a literal ``{{``; ``\\\\{{`` is a literal backslash followed by a placeholder.
  A ``}}`` outside a placeholder is plain text.
* Dicts and lists are walked recursively; keys are never templated.

Placeholder bodies are CEL (see :mod:`relayflow.expressions.cel`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from relayflow.errors import ExpressionError
from relayflow.expressions.cel import ExpressionSyntaxError, check_expression, evaluate


class TemplateSyntaxError(ValueError):
    """A template string is malformed (unclosed ``{{``, empty placeholder).

    ``column`` is the 1-based position of the offending ``{{`` in ``template``; ``path``
    says where the string sits in the templated value (``body.items[2]``), when known.
    """

    def __init__(
        self, template: str, message: str, column: int | None = None, *, path: str | None = None
    ) -> None:
        self.template = template
        self.message = message
        self.column = column
        self.path = path
        where = f" at column {column}" if column is not None else ""
        located = f" (at {path})" if path else ""
        super().__init__(f"invalid template {template!r}{where}: {message}{located}")


@dataclass(frozen=True)
class Placeholder:
    """One ``{{ … }}`` of a template."""

    expression: str
    #: 1-based column of the opening ``{{`` in the template.
    column: int


Part = str | Placeholder


@lru_cache(maxsize=4096)
def parse_template(text: str) -> tuple[Part, ...]:
    """Split ``text`` into literal strings (escapes resolved) and placeholders.

    Adjacent literal text is merged, so a string without placeholders gives one part (or
    none when empty). Raises :class:`TemplateSyntaxError`.
    """
    parts: list[Part] = []
    literal: list[str] = []
    i, length = 0, len(text)
    while i < length:
        if text[i] == "\\":
            end = i
            while end < length and text[end] == "\\":
                end += 1
            if not text.startswith("{{", end):
                literal.append(text[i:end])
                i = end
                continue
            count = end - i
            literal.append("\\" * (count // 2))
            if count % 2:
                literal.append("{{")
                i = end + 2
            else:
                i = end
            continue
        if text.startswith("{{", i):
            close = _placeholder_end(text, i + 2)
            if close is None:
                raise TemplateSyntaxError(text, "'{{' is never closed by '}}'", i + 1)
            expression = text[i + 2 : close].strip()
            if not expression:
                raise TemplateSyntaxError(text, "empty placeholder", i + 1)
            if literal:
                parts.append("".join(literal))
                literal = []
            parts.append(Placeholder(expression, i + 1))
            i = close + 2
            continue
        literal.append(text[i])
        i += 1
    if literal and "".join(literal):
        parts.append("".join(literal))
    return tuple(parts)


def _placeholder_end(text: str, start: int) -> int | None:
    """Index of the ``}}`` closing a placeholder whose body starts at ``start``.

    CEL string literals and balanced map braces inside the body are skipped, so
    ``{{ {"a": {"b": 1}} }}`` and ``{{ "}}" }}`` work. If the body has an unterminated
    string, the first ``}}`` closes it and CEL reports the string.
    """
    depth, i, length = 0, start, len(text)
    while i < length:
        char = text[i]
        if char in "\"'":
            quote = char * 3 if text.startswith(char * 3, i) else char
            i += len(quote)
            while i < length and not text.startswith(quote, i):
                i += 2 if text[i] == "\\" else 1
            if i >= length:
                found = text.find("}}", start)
                return found if found >= 0 else None
            i += len(quote)
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            if depth == 0 and text.startswith("}}", i):
                return i
            depth = max(depth - 1, 0)
        i += 1
    return None


def single_placeholder(parts: tuple[Part, ...]) -> Placeholder | None:
    """The placeholder when the template is exactly one (surrounding whitespace ignored)."""
    placeholders = [part for part in parts if isinstance(part, Placeholder)]
    if len(placeholders) != 1:
        return None
    if any(isinstance(part, str) and part.strip() for part in parts):
        return None
    return placeholders[0]


def _walk_strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string in a templated value with its location (``a.b[2]``)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _walk_strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _walk_strings(item, f"{path}[{index}]")


def check_template(value: Any) -> None:
    """Check every string in ``value`` (dicts and lists walked) without evaluating.

    Raises :class:`TemplateSyntaxError` for a malformed template, or
    :class:`~relayflow.expressions.ExpressionSyntaxError` for bad CEL in a placeholder;
    both carry the template and its ``path`` in ``value``.
    """
    for path, text in _walk_strings(value):
        try:
            parts = parse_template(text)
        except TemplateSyntaxError as exc:
            raise TemplateSyntaxError(text, exc.message, exc.column, path=path or None) from None
        for part in parts:
            if isinstance(part, Placeholder):
                try:
                    check_expression(part.expression)
                except ExpressionSyntaxError as exc:
                    raise ExpressionSyntaxError(
                        part.expression,
                        exc.message,
                        exc.column,
                        template=text,
                        path=path or None,
                    ) from None


def template_expressions(value: Any) -> list[str]:
    """Every placeholder expression in ``value``, in document order (duplicates kept)."""
    expressions: list[str] = []
    for _, text in _walk_strings(value):
        expressions.extend(
            part.expression for part in parse_template(text) if isinstance(part, Placeholder)
        )
    return expressions


def render(value: Any, doc: Mapping[str, Any]) -> Any:
    """Apply templates in ``value`` recursively against the state document ``doc``.

    Every failure, syntax errors included, raises
    :class:`~relayflow.errors.ExpressionError` (``Relayflow.ExpressionError``) naming the
    expression and where the template sits.
    """
    return _render(value, doc, "")


def _render(value: Any, doc: Mapping[str, Any], path: str) -> Any:
    if isinstance(value, str):
        return _render_string(value, doc, path)
    if isinstance(value, Mapping):
        return {
            key: _render(item, doc, f"{path}.{key}" if path else str(key))
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_render(item, doc, f"{path}[{index}]") for index, item in enumerate(value)]
    return value


def _render_string(text: str, doc: Mapping[str, Any], path: str) -> Any:
    located = f" (in template at {path})" if path else ""
    try:
        parts = parse_template(text)
    except TemplateSyntaxError as exc:
        raise ExpressionError(f"{exc}{located}", template=text) from exc
    try:
        single = single_placeholder(parts)
        if single is not None:
            return evaluate(single.expression, doc)
        return "".join(
            part if isinstance(part, str) else text_form(evaluate(part.expression, doc))
            for part in parts
        )
    except ExpressionError as exc:
        if not path:
            raise
        raise ExpressionError(f"{exc.message}{located}", **exc.details, path=path) from exc


def text_form(value: Any) -> str:
    """How a value reads inside text: strings as-is, everything else in (compact) JSON form.

    ``null`` renders as ``null``, as Step Functions' ``States.Format`` does, so a template
    reads the same whether the compiler runs it natively or in a Lambda.
    """
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
