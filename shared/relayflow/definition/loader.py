"""Read a definition file (YAML or JSON) into plain data, refusing duplicate keys.

PyYAML and ``json`` both keep the last of two equal keys silently; a definition with two
``charge`` steps would lose one without a word. Both readers here report every duplicate
with its line instead.

Definitions are external input like any API body: :mod:`relayflow.intake` refuses YAML
anchors and aliases and nesting past its depth limit before anything else reads the text
(an alias bomb would make every later pass exponential), and then non-finite or out-of-range
numbers, lone surrogates and over-long keys, each reported as a problem with its path.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from relayflow.definition.problems import Problem
from relayflow.intake import (
    JSON_HOOKS,
    IntakeError,
    check_value,
    check_yaml,
    decode_utf8,
    depth_message,
)


@dataclass
class LoadedDocument:
    file: str
    data: Any = None
    problems: list[Problem] = field(default_factory=list)


class _Yaml12Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core-schema scalars.

    YAML 1.1 reads ``yes``/``no``/``on``/``off`` as booleans (a step named ``yes`` becomes
    ``True``), ``1:30`` as the number 90, and ``2030-01-01`` as a date object that JSON cannot
    hold. Here only true/false are booleans, numbers are plain decimal (or 0x/0o) forms, and
    dates stay strings.
    """


_REPLACED = {
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:timestamp",
}
_Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _REPLACED]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
    list("-+0123456789"),
)
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


def _construct_yaml12_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    return int(text, 0) if text.startswith(("0x", "0o")) else int(text)


_Yaml12Loader.add_constructor("tag:yaml.org,2002:int", _construct_yaml12_int)


def _duplicate_paths(node: yaml.Node, path: list[str], out: list[tuple[str, str, int]]) -> None:
    """Walk the YAML node tree and record (path, key, line) for every repeated key."""
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if key in seen:
                out.append((".".join([*path, key]), key, key_node.start_mark.line + 1))
            seen.add(key)
            _duplicate_paths(value_node, [*path, key], out)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _duplicate_paths(
                item, [*path[:-1], f"{path[-1]}[{index}]"] if path else [f"[{index}]"], out
            )


#: The tags whose values JSON can hold; the rest build bytes (``!!binary``), sets, dates
#: (``!!timestamp``), pairs, or nothing at all (``!!python/…``, application tags).
_JSON_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}"
    for name in ("str", "int", "float", "bool", "null", "map", "seq", "merge")
)


def _short_tag(tag: str) -> str:
    return "!!" + tag.removeprefix("tag:yaml.org,2002:") if tag.startswith("tag:yaml.org") else tag


def _non_json_tags(node: yaml.Node, path: str, out: list[tuple[str, str, int]]) -> None:
    """Record (path, tag, line) for every node, key or value, whose tag is not a JSON type."""
    if node.tag not in _JSON_TAGS:
        out.append((path, _short_tag(node.tag), node.start_mark.line + 1))
        return
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
            here = f"{path}.{key}" if path else key
            _non_json_tags(key_node, here, out)
            _non_json_tags(value_node, here, out)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _non_json_tags(item, f"{path}[{index}]", out)


def parse_text(text: str, file: str, *, fmt: str | None = None) -> LoadedDocument:
    """Parse YAML or JSON text. ``fmt`` is ``"json"``, ``"yaml"`` or ``None`` (by content).

    A document the intake policy refuses has no ``data``, and one problem whose ``rule`` is
    the policy's (``depth``, ``yaml-alias``, ``non-finite-number``, ...)."""
    doc = LoadedDocument(file=file)
    try:
        if fmt == "json" or (fmt is None and text.lstrip().startswith("{")):
            _parse_json(text, doc)
        else:
            _parse_yaml(text, doc)
        if doc.data is not None:
            check_value(doc.data)
    except IntakeError as exc:
        doc.data = None
        doc.problems = [Problem(file, exc.path, exc.rule, exc.reason)]
    except RecursionError:
        doc.data = None
        doc.problems = [Problem(file, "", "depth", f"the definition {depth_message()}")]
    return doc


def _parse_json(text: str, doc: LoadedDocument) -> None:
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in items:
            if key in result:
                duplicates.append(key)
            result[key] = value
        return result

    try:
        doc.data = json.loads(text, object_pairs_hook=pairs, **JSON_HOOKS)
    except json.JSONDecodeError as exc:
        doc.problems.append(
            Problem(doc.file, f"line {exc.lineno}", "syntax", f"invalid JSON: {exc.msg}")
        )
        return
    doc.problems.extend(
        Problem(doc.file, key, "duplicate-key", f"key '{key}' appears more than once")
        for key in duplicates
    )


def _parse_yaml(text: str, doc: LoadedDocument) -> None:
    check_yaml(text)
    try:
        node = yaml.compose(text, Loader=_Yaml12Loader)
        tagged: list[tuple[str, str, int]] = []
        if node is not None:
            _non_json_tags(node, "", tagged)
        if tagged:
            # Before any value is built: a definition is JSON, whatever it is written in.
            doc.problems.extend(
                Problem(
                    doc.file,
                    path,
                    "yaml-tag",
                    f"the tag {tag} (line {line}) builds a value JSON cannot hold; "
                    "write a string, number, boolean, null, list or mapping",
                )
                for path, tag, line in tagged
            )
            return
        doc.data = yaml.load(text, Loader=_Yaml12Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "document"
        reason = getattr(exc, "problem", None) or str(exc)
        message = f"invalid YAML: {reason}" + _pointed(text, mark)
        doc.problems.append(Problem(doc.file, where, "syntax", message))
        return
    found: list[tuple[str, str, int]] = []
    if node is not None:
        _duplicate_paths(node, [], found)
    doc.problems.extend(
        Problem(
            doc.file, path, "duplicate-key", f"key '{key}' appears more than once (line {line})"
        )
        for path, key, line in found
    )


def load_file(path: str | Path) -> LoadedDocument:
    """Read and parse a definition file; problems are returned, never raised."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return LoadedDocument(
            str(path), None, [Problem(str(path), "", "file", exc.strerror or str(exc))]
        )
    try:
        text = decode_utf8(raw, "the file")
    except IntakeError as exc:
        return LoadedDocument(str(path), None, [Problem(str(path), "", exc.rule, exc.reason)])
    fmt = "json" if path.suffix.lower() == ".json" else "yaml"
    return parse_text(text, str(path), fmt=fmt)


def _pointed(text: str, mark: Any) -> str:
    """The line a YAML error points at, with a caret under its column (and, for the usual
    indentation slip, what to check); ``""`` without a position."""
    if mark is None:
        return ""
    lines = text.splitlines()
    if not lines or mark.line < 0:
        return ""
    if mark.line >= len(lines):  # the end of the text: the last line, after its end
        line = lines[-1]
        pointer = " " * len(line) + "^ (the document ends here: something is not closed)"
        return f"\n    {line}\n    {pointer}"
    line = lines[mark.line]
    pointer = " " * mark.column + "^"
    hint = ""
    if line[: len(line) - len(line.lstrip())] and mark.line > 0:
        hint = " (check this line's indentation against the lines above: YAML nests by spaces)"
    return f"\n    {line}\n    {pointer}{hint}"
