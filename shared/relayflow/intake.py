"""The JSON intake policy: what every external body must be before Relayflow keeps any of it.

API request bodies, webhook deliveries, the guest approval form, events, workflow definitions
(JSON and YAML) and the CLI's ``--input``/``--data`` files all pass through here, so that
whatever is accepted can be stored in DynamoDB, sent to Step Functions, evaluated by CEL and
serialized back by every route. A body is refused when it has:

========================  ======  ===========================================================
rule                      status  what
========================  ======  ===========================================================
``encoding``              400     bytes that are not UTF-8
``lone-surrogate``        400     a string or key with a lone UTF-16 surrogate (``"\\ud800"``)
``depth``                 400     objects/arrays nested deeper than :data:`MAX_DEPTH`
``yaml-alias``            400     a YAML anchor or alias (definitions only)
``non-finite-number``     422     ``NaN``, ``Infinity``, ``-Infinity``, or a number that
                                  overflows a double (``1e999``)
``number-range``          422     an integer of more than :data:`MAX_INTEGER_DIGITS` digits,
                                  or a non-zero number whose magnitude DynamoDB cannot hold
``key-length``            422     an empty object key, or one longer than
                                  :data:`MAX_KEY_CHARS` (DynamoDB map keys need one)
========================  ======  ===========================================================

The limits are chosen from the tightest reader. DynamoDB nests documents at most 32 levels
(an approval's data is kept one level down, at ``decision.data``, and the body's own object
wraps it one level too), holds numbers of at most 38 significant digits between 1e-130 and
1e126, and needs map keys of at least one character. 24 levels leaves DynamoDB 7 levels or
more, and is far below what ``json``, pydantic, PyYAML and CEL handle (hundreds of levels)
and far above what real payloads use.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

#: Deepest nesting accepted: ``{}`` and ``[]`` are one level, ``{"a": []}`` two.
MAX_DEPTH = 24
#: Longest object key accepted, in characters.
MAX_KEY_CHARS = 1024
#: Most digits an integer may have (DynamoDB's number precision).
MAX_INTEGER_DIGITS = 38
#: Non-zero numbers must have a magnitude in [MIN_MAGNITUDE, MAX_MAGNITUDE) (DynamoDB's range).
MIN_MAGNITUDE = 1e-130
MAX_MAGNITUDE = 1e126

#: Rules whose refusal is 400 (the body cannot be read safely); the others answer 422.
UNREADABLE_RULES = frozenset({"encoding", "lone-surrogate", "depth", "yaml-alias"})

_SURROGATE = re.compile("[\ud800-\udfff]")


class IntakeError(ValueError):
    """A body the intake policy refuses: ``rule`` (table above), ``path`` (``data.items[2]``,
    ``""`` for the whole body), ``reason`` (what is wrong there) and ``message`` (both)."""

    def __init__(self, rule: str, path: str, reason: str) -> None:
        self.rule = rule
        self.path = path
        self.reason = reason
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return f"{self.path}: {self.reason}" if self.path else self.reason

    @property
    def status(self) -> int:
        """The HTTP status an API answers this refusal with (400 or 422)."""
        return 400 if self.rule in UNREADABLE_RULES else 422

    def under(self, prefix: str) -> IntakeError:
        """The same refusal with ``prefix`` in front of its path (``body``, ``--input``)."""
        return IntakeError(self.rule, join_path(prefix, self.path), self.reason)


def join_path(prefix: str, path: str) -> str:
    """``prefix`` and ``path`` as one path (``body`` + ``data.x`` → ``body.data.x``)."""
    if not prefix or not path:
        return prefix or path
    return prefix + path if path.startswith("[") else f"{prefix}.{path}"


def depth_message() -> str:
    """``nests deeper than the limit of 24 levels``: the refusal's reason."""
    return f"nests deeper than the limit of {MAX_DEPTH} levels"


# ----------------------------------------------------------------------------- JSON text


class _Refused:
    """What a parse hook puts in place of a number the policy refuses; :func:`check_value`
    reports it with its path."""

    __slots__ = ("message", "rule")

    def __init__(self, rule: str, message: str) -> None:
        self.rule, self.message = rule, message


def _constant(name: str) -> _Refused:
    return _Refused("non-finite-number", f"{name} is not a finite number")


def _float(text: str) -> float | _Refused:
    value = float(text)
    if not math.isfinite(value):
        return _Refused("non-finite-number", f"{_shorten(text)} overflows to {value}")
    return value


def _int(text: str) -> int | _Refused:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        return _Refused(
            "number-range",
            f"an integer of {len(text.lstrip('-'))} digits is longer than "
            f"{MAX_INTEGER_DIGITS} digits",
        )
    return int(text)


#: ``json.loads`` hooks that put a :class:`_Refused` marker where the policy refuses a number
#: (before ``int`` meets a 5,000-digit literal); :func:`check_value` reports it with its path.
JSON_HOOKS: dict[str, Any] = {"parse_constant": _constant, "parse_float": _float, "parse_int": _int}


def loads(text: str | bytes) -> Any:
    """Parse JSON ``text`` and check it with :func:`check_value`.

    Raises :class:`json.JSONDecodeError` for text that is not JSON, and
    :class:`IntakeError` for JSON the policy refuses (paths relative to the document).
    """
    if isinstance(text, bytes | bytearray):
        text = decode_utf8(bytes(text))
    try:
        value = json.loads(text, **JSON_HOOKS)
    except RecursionError:
        # json's C parser gives up long before the stack does; any depth that reaches it is
        # far past the limit.
        raise IntakeError("depth", "", f"the JSON {depth_message()}") from None
    check_value(value)
    return value


def decode_utf8(raw: bytes, what: str = "the body") -> str:
    """``raw`` as text; :class:`IntakeError` (``encoding``) naming the first bad byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise IntakeError(
            "encoding", "", f"{what} is not UTF-8 text (byte {exc.start} is invalid)"
        ) from None


# ----------------------------------------------------------------------------- values


def check_value(value: Any, path: str = "", *, level: int = 0) -> None:
    """Check an already-parsed value (JSON, YAML or a form's conversion) against the policy;
    raise :class:`IntakeError` for the first value refused, in document order. ``path``
    names the value itself, and ``level`` counts the levels it sits under in its body (a
    request's ``data`` sits one level under the body's object)."""
    for rule, where, reason in _problems(value, path, level):
        raise IntakeError(rule, where, reason)


def _problems(value: Any, path: str, depth: int) -> Iterator[tuple[str, str, str]]:
    if isinstance(value, dict | list):
        if depth >= MAX_DEPTH:
            yield "depth", path, f"the value {depth_message()}"
            return
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(value, dict):
                text = str(key)
                if _SURROGATE.search(text):
                    yield "lone-surrogate", path, _surrogate_message("a key", text)
                    return
                if not text:
                    yield (
                        "key-length",
                        path,
                        f"an empty key (keys have 1 to {MAX_KEY_CHARS} characters)",
                    )
                    return
                if len(text) > MAX_KEY_CHARS:
                    yield (
                        "key-length",
                        path,
                        f"a key of {len(text)} characters is longer than {MAX_KEY_CHARS}",
                    )
                    return
                where = join_path(path, _segment(text))
            else:
                where = f"{path}[{key}]"
            yield from _problems(item, where, depth + 1)
    elif isinstance(value, str):
        if _SURROGATE.search(value):
            yield "lone-surrogate", path, _surrogate_message("the string", value)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        if value.bit_length() > 126 and len(str(abs(value))) > MAX_INTEGER_DIGITS:
            yield (
                "number-range",
                path,
                f"an integer of {len(str(abs(value)))} digits is longer than "
                f"{MAX_INTEGER_DIGITS} digits",
            )
    elif isinstance(value, float):
        if not math.isfinite(value):
            yield "non-finite-number", path, f"{value} is not a finite number"
        elif value != 0 and not MIN_MAGNITUDE <= abs(value) < MAX_MAGNITUDE:
            yield (
                "number-range",
                path,
                f"{value!r} is outside the range of numbers kept "
                f"({MIN_MAGNITUDE:g} to {MAX_MAGNITUDE:g} in magnitude)",
            )
    elif isinstance(value, _Refused):
        yield value.rule, path, value.message


def _segment(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$-]*", key) else json.dumps(key).join("[]")


def _surrogate_message(what: str, text: str) -> str:
    found = _SURROGATE.search(text)
    assert found is not None
    return (
        f"{what} holds a lone UTF-16 surrogate (U+{ord(found.group()):04X} at character "
        f"{found.start()}), which is not text"
    )


def _shorten(text: str, width: int = 24) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


# ----------------------------------------------------------------------------- YAML text


def check_yaml(text: str) -> None:
    """Refuse YAML anchors and aliases, and nesting past :data:`MAX_DEPTH`, reading only the
    event stream. Run this BEFORE composing or loading: an alias bomb of a few hundred bytes
    expands to billions of nodes for any pass that follows aliases, and the composer recurses
    once per level. Syntax errors are left to the parser that follows, which reports them
    with their line.

    libyaml's event parser is used when PyYAML has it: PyYAML's own scanner looks ahead up to
    1,024 characters for each open flow collection, so ``[[[[…`` costs it a second, libyaml a
    millisecond. Text libyaml refuses is scanned again by PyYAML, which the loader uses."""
    import yaml

    parsers = [yaml.SafeLoader]
    if yaml.__with_libyaml__:
        parsers.insert(0, yaml.CSafeLoader)
    for parser in parsers:
        try:
            _check_yaml_events(yaml.parse(text, Loader=parser))
        except yaml.YAMLError as exc:
            if "maximum nesting depth" in str(exc):  # libyaml's own limit (1,000 levels)
                raise IntakeError("depth", "", f"the YAML {depth_message()}") from None
            continue
        except RecursionError:  # a parser that recursed after all: still the depth rule
            raise IntakeError("depth", "", f"the YAML {depth_message()}") from None
        return


def _check_yaml_events(events: Iterator[Any]) -> None:
    import yaml

    frames: list[list[Any]] = []  # [is_mapping, key_next, segment] per open collection
    for event in events:
        if isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            frames.pop()
            continue
        if not isinstance(event, yaml.NodeEvent):
            continue
        _yaml_node_starts(frames, event)
        path = _yaml_path(frames)
        if isinstance(event, yaml.AliasEvent) or event.anchor is not None:
            line = event.start_mark.line + 1
            raise IntakeError(
                "yaml-alias",
                path,
                f"YAML anchors (&name) and aliases (*name) are not accepted (line {line})",
            )
        if isinstance(event, yaml.CollectionStartEvent):
            if len(frames) >= MAX_DEPTH:
                raise IntakeError("depth", path, f"the YAML {depth_message()}")
            mapping = isinstance(event, yaml.MappingStartEvent)
            frames.append([mapping, True, None if mapping else -1])


def _yaml_node_starts(frames: list[list[Any]], event: Any) -> None:
    """A node starts inside the innermost collection: in a mapping it is the next key (its
    text becomes the path segment) or that key's value; in a sequence, the next item."""
    if not frames:
        return
    frame = frames[-1]
    if not frame[0]:
        frame[2] += 1
    elif frame[1]:
        frame[1], frame[2] = False, str(getattr(event, "value", "?"))
    else:
        frame[1] = True


def _yaml_path(frames: list[list[Any]]) -> str:
    path = ""
    for is_mapping, _, segment in frames:
        if segment is None:
            break
        path = join_path(path, _segment(segment)) if is_mapping else f"{path}[{segment}]"
    return path
