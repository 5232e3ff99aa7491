"""JSON Schemas a tenant writes (``input_schema``, an approval's ``form_schema``, an agent's
``output_schema``), checked and evaluated with linear-time regular expressions.

jsonschema evaluates ``pattern`` and ``patternProperties`` with Python's backtracking ``re``:
``^(a+)+$`` against 26 ``a`` and a ``!`` takes seconds, and a public webhook with such a
schema is an unauthenticated denial of service. Here both keywords run on RE2 (google-re2),
whose matching time is linear in the input. RE2 has no backreferences and no lookaround, so
a schema using them is refused when the definition is validated (:func:`check_schema`), and
a stored one that slipped through fails every value instead of running on ``re``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache, lru_cache
from typing import Any

__all__ = ["UnsupportedPattern", "check_schema", "validator"]

#: Keywords whose values are data, not subschemas: a ``pattern`` key inside them is no pattern.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})


class UnsupportedPattern(Exception):
    """A pattern RE2 cannot compile: ``pointer`` (RFC 6901) names it in the schema."""

    def __init__(self, pointer: str, pattern: str, reason: str) -> None:
        self.pointer = pointer
        self.pattern = pattern
        self.message = (
            f"pattern {pattern!r} at {pointer or '/'} is not supported: patterns run on RE2 "
            f"(linear time), which has no backreferences or lookaround ({reason})"
        )
        super().__init__(self.message)


@lru_cache(maxsize=512)
def _compiled(pattern: str) -> Any:
    """``pattern`` compiled by RE2; raises ``ValueError`` with RE2's reason when it cannot."""
    import re2

    options = re2.Options()
    # RE2 logs every refused pattern to stderr; the caller reports it instead.
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode(errors="replace")
        raise ValueError(str(reason)) from None


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text`` (JSON Schema's ``pattern`` is not
    anchored), in time linear in ``text``. Raises ``ValueError`` when RE2 cannot compile it."""
    return _compiled(pattern).search(text) is not None


def _patterns(node: Any, pointer: str = "") -> Iterator[tuple[str, str]]:
    """Every ``(pointer, pattern)`` of the schema ``node``: ``pattern`` values and
    ``patternProperties`` keys, at any depth, outside data keywords."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            here = f"{pointer}/{str(key).replace('~', '~0').replace('/', '~1')}"
            if key in _DATA_KEYWORDS:
                continue
            if key == "pattern" and isinstance(value, str):
                yield here, value
            elif key == "patternProperties" and isinstance(value, Mapping):
                for name in value:
                    if isinstance(name, str):
                        yield f"{here}/{name.replace('~', '~0').replace('/', '~1')}", name
            yield from _patterns(value, here)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _patterns(item, f"{pointer}/{index}")


def check_schema(schema: Mapping[str, Any]) -> None:
    """Raise jsonschema's ``SchemaError`` unless ``schema`` is valid for its dialect, and
    :class:`UnsupportedPattern` for the first pattern RE2 cannot compile."""
    from jsonschema.validators import validator_for

    validator_for(schema).check_schema(schema)
    for pointer, pattern in _patterns(schema):
        try:
            _compiled(pattern)
        except ValueError as exc:
            raise UnsupportedPattern(pointer, pattern, str(exc)) from None


def validator(schema: Mapping[str, Any]) -> Any:
    """A jsonschema validator of ``schema`` (for its dialect) whose ``pattern`` and
    ``patternProperties`` run on RE2."""
    from jsonschema.validators import validator_for

    return _linear(validator_for(schema))(schema)


class _LinearRe:
    """Stands for the ``re`` module inside jsonschema's keyword code: ``search`` runs on RE2
    (a pattern RE2 cannot compile matches nothing, which :func:`check_schema` refuses at
    definition time anyway); everything else is ``re``'s."""

    def __getattr__(self, name: str) -> Any:
        import re

        return getattr(re, name)

    @staticmethod
    def search(pattern: str, string: str, flags: int = 0) -> Any:
        try:
            return _compiled(pattern).search(string)
        except ValueError:
            return None


@cache
def _linear_globals(module_name: str) -> dict[str, Any]:
    """A copy of the globals of the jsonschema module ``module_name`` in which ``re`` is
    :class:`_LinearRe` and the module's own functions, and ``jsonschema._utils``' (by name
    or as ``_utils.…``), are copies that use these globals.

    jsonschema reads ``patternProperties`` keys with ``re.search`` in more places than the
    two keywords (``additionalProperties``, ``unevaluatedProperties`` and their helpers);
    rebinding its own functions keeps its semantics exactly while no tenant pattern ever
    reaches the backtracking engine."""
    import importlib
    import types

    space = dict(vars(importlib.import_module(module_name)))
    space["re"] = _LinearRe()
    utils = None if module_name == "jsonschema._utils" else _linear_globals("jsonschema._utils")
    for key, value in list(space.items()):
        if not isinstance(value, types.FunctionType):
            continue
        if value.__module__ == module_name:
            space[key] = _rebound(value, space)
        elif utils is not None and value.__module__ == "jsonschema._utils":
            space[key] = utils[value.__name__]
    if utils is not None and isinstance(space.get("_utils"), types.ModuleType):
        space["_utils"] = types.SimpleNamespace(**utils)
    return space


def _rebound(function: Any, space: dict[str, Any]) -> Any:
    import types

    copy = types.FunctionType(
        function.__code__, space, function.__name__, function.__defaults__, function.__closure__
    )
    copy.__kwdefaults__ = function.__kwdefaults__
    return copy


@cache
def _linear(base: Any) -> Any:
    """``base`` (a jsonschema validator class) with every keyword on RE2."""
    from jsonschema import ValidationError
    from jsonschema.validators import extend

    keywords: dict[str, Any] = {}
    for name, function in base.VALIDATORS.items():
        module = getattr(function, "__module__", "")
        if module.startswith("jsonschema."):
            keywords[name] = _linear_globals(module)[function.__name__]

    def pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "string"):
            return
        try:
            matched = search(patrn, instance)
        except ValueError as exc:
            yield ValidationError(f"pattern {patrn!r} is not supported (RE2: {exc})")
            return
        if not matched:
            yield ValidationError(f"{instance!r} does not match {patrn!r}")

    def pattern_properties(
        validator: Any, properties: Mapping[str, Any], instance: Any, schema: Any
    ) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        for patrn, subschema in properties.items():
            for key, value in instance.items():
                try:
                    matched = search(patrn, key)
                except ValueError as exc:
                    yield ValidationError(f"pattern {patrn!r} is not supported (RE2: {exc})")
                    break
                if matched:
                    yield from validator.descend(value, subschema, path=key, schema_path=patrn)

    keywords["pattern"] = pattern
    keywords["patternProperties"] = pattern_properties
    linear = extend(base, validators=keywords)

    def evolve(self: Any, **changes: Any) -> Any:
        # jsonschema's evolve picks the stock class of a subschema that names its own
        # ``$schema``; the linear class of that dialect stands in for it.
        import attrs
        from jsonschema.validators import validator_for

        schema = changes.setdefault("schema", self.schema)
        target = _linear(validator_for(schema, default=base))
        for field in attrs.fields(type(self)):
            if field.init and field.alias not in changes:
                changes[field.alias] = getattr(self, field.name)
        return target(**changes)

    linear.evolve = evolve
    return linear
