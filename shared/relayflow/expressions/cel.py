"""CEL expressions over the state document: parsing, evaluation and static analysis.

Evaluation is delegated to ``celpy`` (cel-python). This module adds what Relayflow needs
around it: syntax errors with a 1-based column, caches, conversion of results to plain
JSON-compatible Python, and :class:`relayflow.errors.ExpressionError` for every evaluation
failure.

Each distinct expression is parsed once per process, whoever asks first (validation, the
compiler, a step at run time). Two bounded caches share the work: parse trees and compiled
programs (10 to 60 KB each, 2,048 of them: the run-time hot set), and each expression's
static facts (whether it parses, the paths it reads, its JSONPath when it is a plain path:
a few hundred bytes, 32,768 of them, enough for the largest definition Step Functions can
hold). Validation and compilation read only the facts, so a definition of 4,000 steps costs
4,000 parses, not one per question asked about each expression.

``celpy`` is imported lazily, on the first parse, so importing this module stays cheap.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from relayflow.document import ROOTS
from relayflow.errors import ExpressionError

if TYPE_CHECKING:
    import celpy
    from lark import Tree

#: Receiver macros whose first argument binds a variable for the remaining arguments.
MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})

#: Parse-tree nodes that merely wrap a single child (precedence levels, parentheses).
_WRAPPERS = frozenset(
    {
        "expr",
        "conditionalor",
        "conditionaland",
        "relation",
        "addition",
        "multiplication",
        "unary",
        "member",
        "primary",
        "paren_expr",
    }
)

#: Identifiers CEL resolves to types, not variables (``type(x) == string``).
_TYPE_NAMES = frozenset(
    {
        "bool",
        "bytes",
        "double",
        "google",
        "int",
        "list",
        "map",
        "null_type",
        "string",
        "type",
        "uint",
    }
)

#: Parse trees and programs kept (the run-time hot set; each is 10 to 60 KB).
_CACHE_SIZE = 2048
#: Expressions whose static facts are kept (each a few hundred bytes).
FACTS_CACHE_SIZE = 32_768
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: Roots an expression may read: the document's, plus ``args`` inside an HTTP tool operation
#: (validation allows ``args`` there only), ``event`` in a ``cancel_on`` match and ``output``
#: in a compensation (the compensated step's output).
_BINDABLE = frozenset((*ROOTS, "args", "event", "output"))


class ExpressionSyntaxError(ValueError):
    """A CEL expression does not parse.

    ``column`` is 1-based and counts characters from the start of the expression (newlines
    included); it is ``None`` when the parser gives no position. When the expression sits
    inside a template, ``template`` and ``path`` (where the template is, e.g.
    ``body.items[2]``) locate it.
    """

    def __init__(
        self,
        expression: str,
        message: str,
        column: int | None = None,
        *,
        template: str | None = None,
        path: str | None = None,
    ) -> None:
        self.expression = expression
        self.message = message
        self.column = column
        self.template = template
        self.path = path
        where = f" at column {column}" if column is not None else ""
        text = f"invalid expression {expression!r}{where}: {message}"
        if template is not None:
            text += f" (in template {template!r}"
            text += f" at {path})" if path else ")"
        super().__init__(text)


# --------------------------------------------------------------------------- celpy access


@lru_cache(maxsize=1)
def _environment() -> celpy.Environment:
    import celpy

    return celpy.Environment()


def parse(src: str) -> Tree:
    """The celpy (lark) parse tree of ``src``; raises :class:`ExpressionSyntaxError`.

    The tree is cached and shared: callers must not modify it.
    """
    if not isinstance(src, str):
        raise ExpressionSyntaxError(repr(src), f"expected a string, got {type(src).__name__}")
    return _parse(src)


@lru_cache(maxsize=_CACHE_SIZE)
def _parse(src: str) -> Tree:
    from celpy.celparser import CELParseError

    try:
        return _environment().compile(src)
    except CELParseError as exc:
        message, column = _describe_parse_error(src, exc)
        raise ExpressionSyntaxError(src, message, column) from None


def _describe_parse_error(src: str, exc: Exception) -> tuple[str, int | None]:
    from lark.exceptions import UnexpectedCharacters, UnexpectedToken

    cause = exc.__context__
    line = getattr(exc, "line", None)
    column = getattr(exc, "column", None)
    offset = _offset(src, line, column)
    if isinstance(cause, UnexpectedToken):
        if cause.token.type == "$END":
            return "unexpected end of expression", len(src) + 1
        return f"unexpected {cause.token.value!r}", offset
    if isinstance(cause, UnexpectedCharacters):
        if cause.char in "\"'":
            return "unterminated or malformed string literal", offset
        if cause.char == "=":
            return "unexpected character '=': compare with == (CEL has no assignment)", offset
        return f"unexpected character {cause.char!r}", offset
    return str(exc).splitlines()[0] if str(exc) else "syntax error", offset


def _offset(src: str, line: int | None, column: int | None) -> int | None:
    """Turn lark's (line, column) into a 1-based offset into the whole source."""
    if line is None or column is None or line < 1 or column < 1:
        return None
    lines = src.split("\n")
    return sum(len(text) + 1 for text in lines[: line - 1]) + column


@dataclass(frozen=True)
class _Facts:
    """What static analysis asks about one expression, from its single parse."""

    paths: tuple[tuple[str, ...], ...] = ()
    jsonpath: str | None = None
    #: ``(message, column)`` when the expression does not parse.
    error: tuple[str, int | None] | None = None


@lru_cache(maxsize=FACTS_CACHE_SIZE)
def _facts(src: str) -> _Facts:
    try:
        tree = parse(src)
    except ExpressionSyntaxError as exc:
        return _Facts(error=(exc.message, exc.column))
    paths: list[tuple[str, ...]] = []
    for path in _collect(tree, frozenset()):
        if path not in paths:
            paths.append(path)
    return _Facts(paths=tuple(paths), jsonpath=plain_jsonpath(tree))


def _checked_facts(src: str) -> _Facts:
    if not isinstance(src, str):
        raise ExpressionSyntaxError(repr(src), f"expected a string, got {type(src).__name__}")
    facts = _facts(src)
    if facts.error is not None:
        raise ExpressionSyntaxError(src, *facts.error)
    return facts


def check_expression(src: str) -> None:
    """Parse ``src`` as CEL without evaluating it; raises :class:`ExpressionSyntaxError`."""
    _checked_facts(src)


def expression_jsonpath(src: str) -> str | None:
    """``"$.trigger.order.id"`` when ``src`` is a plain path, else None.

    A plain path starts at a document root and uses only ``.field``, non-negative integer
    indexes (``items[0]``) and string indexes that are identifiers (``m["id"]``).
    Raises ExpressionSyntaxError when ``src`` does not parse.
    """
    return _checked_facts(src).jsonpath


def plain_jsonpath(node: Any) -> str | None:
    """The JSONPath of a parse (sub)tree that is a plain path (see
    :func:`expression_jsonpath`), else None."""
    base, accessors = member_chain(node)
    root = root_name(base)
    if root not in ROOTS:
        return None
    if root == "error" and [a for _, a in accessors] != ["Error"]:
        # A caught error's Cause is the Lambda's raw report (with its stack trace): only
        # error.Error is read natively; the rest goes through a step Lambda, which reads the
        # error in its public form (relayflow.causes.public_error).
        return None
    path = f"$.{root}"
    for kind, accessor in accessors:
        if kind == "field":
            path += f".{accessor}"
            continue
        literal = literal_value(accessor)
        if literal is None:
            return None
        literal_kind, value = literal
        if literal_kind == "int" and value >= 0:
            path += f"[{value}]"
        elif literal_kind == "string" and _IDENTIFIER.fullmatch(value):
            path += f".{value}"
        else:
            return None
    return path


# --------------------------------------------------------------------------- evaluation


#: How much of each root an expression needs: ``None`` = all of it, else its top-level keys.
_Plan = dict[str, frozenset[str] | None]


@lru_cache(maxsize=_CACHE_SIZE)
def _program(src: str) -> tuple[Any, _Plan]:
    """The celpy runner for ``src`` and which parts of the document it can reach.

    Converting the document to CEL values costs time proportional to its size, and
    ``steps`` grows with every step. When every reference to a root names a static key
    (``steps.fetch…``, never ``steps`` alone or ``steps[expr]``), only those keys are
    bound; an absent key fails exactly as it would on the whole document.
    """
    from lark import Token

    tree = parse(src)
    names = {tok.value for tok in tree.scan_values(lambda v: isinstance(v, Token))}
    paths = expression_paths(src)
    plan: _Plan = {}
    for root in sorted(names & _BINDABLE):
        references = [path for path in paths if path[0] == root]
        if references and all(len(path) > 1 for path in references):
            plan[root] = frozenset(path[1] for path in references)
        else:
            plan[root] = None
    return _environment().program(tree), plan


def _bind(value: Any, keys: frozenset[str] | None) -> Any:
    from celpy.adapter import json_to_cel

    if keys is not None and isinstance(value, Mapping):
        value = {key: value[key] for key in keys if key in value}
    return json_to_cel(value)


def evaluate(src: str, doc: Mapping[str, Any]) -> Any:
    """Evaluate the CEL expression ``src`` against the state document ``doc``.

    The roots of ``doc`` (``trigger``, ``steps``, ``run``, ``item``, ``index``, ``error``)
    are the variables; an absent root is not bound. The result is plain JSON-compatible
    Python (dict/list/str/int/float/bool/None). Any evaluation failure raises
    :class:`~relayflow.errors.ExpressionError` naming the expression, and so does a syntax
    error: at run time every failure is the one named error ``Relayflow.ExpressionError``
    (validate definitions beforehand with :func:`check_expression`).
    """
    try:
        runner, plan = _program(src)
    except ExpressionSyntaxError as exc:
        raise ExpressionError(str(exc), expression=src) from exc
    try:
        activation = {name: _bind(doc[name], keys) for name, keys in plan.items() if name in doc}
    except (ValueError, TypeError) as exc:
        raise ExpressionError(
            f"expression {src!r}: the state document holds a value CEL cannot use: {exc}",
            expression=src,
        ) from exc
    try:
        result = runner.evaluate(activation)
    except RecursionError as exc:
        raise ExpressionError(f"expression {src!r} is nested too deeply", expression=src) from exc
    except Exception as exc:  # celpy signals failures with several exception types
        raise _evaluation_error(src, exc) from exc
    return to_json(result, src)


def evaluate_condition(src: str, doc: Mapping[str, Any]) -> bool:
    """Evaluate ``src`` as a condition; a result that is not a bool is an ExpressionError."""
    result = evaluate(src, doc)
    if not isinstance(result, bool):
        raise ExpressionError(
            f"condition {src!r} must evaluate to a bool, got {_json_type(result)} {result!r}",
            expression=src,
        )
    return result


def _evaluation_error(src: str, exc: BaseException) -> ExpressionError:
    from celpy.evaluation import CELEvalError

    reason = _clean_reason(str(exc.args[0]) if exc.args else type(exc).__name__)
    cause_args = exc.args[2] if len(exc.args) > 2 and isinstance(exc.args[2], tuple) else ()
    if " " not in reason and cause_args:
        # celpy reports some failures as a bare code ("invalid_argument"); add Python's text.
        reason += f": {cause_args[0]}"
    if isinstance(exc, CELEvalError) and exc.tree is not None:
        from celpy.evaluation import tree_dump

        part = re.sub(r"\s+", " ", tree_dump(exc.tree)).strip()
        if part and part.replace(" ", "") != src.replace(" ", "") and repr(part) not in reason:
            reason += f" (in {part!r})"
    return ExpressionError(f"expression {src!r} failed: {reason}", expression=src)


_CEL_TYPE_NAMES = {
    "NoneType": "null",
    "BoolType": "bool",
    "IntType": "int",
    "UintType": "uint",
    "DoubleType": "double",
    "StringType": "string",
    "BytesType": "bytes",
    "ListType": "list",
    "MapType": "map",
    "TimestampType": "timestamp",
    "DurationType": "duration",
}
_OPERATORS = {
    "relation_lt": "<",
    "relation_le": "<=",
    "relation_gt": ">",
    "relation_ge": ">=",
    "relation_eq": "==",
    "relation_ne": "!=",
    "relation_in": "in",
    "addition_add": "+",
    "addition_sub": "-",
    "multiplication_mul": "*",
    "multiplication_div": "/",
    "multiplication_mod": "%",
    "unary_not": "!",
    "unary_neg": "-",
}


def _clean_reason(reason: str) -> str:
    """Make celpy's messages readable: CEL type names, operators, no activation dump."""
    reason = reason.split(" (in activation", 1)[0]
    reason = re.sub(
        r"<class '(?:celpy\.celtypes\.)?(\w+)'>",
        lambda m: _CEL_TYPE_NAMES.get(m.group(1), m.group(1)),
        reason,
    )
    reason = re.sub(
        r"Token\('RULE', '(\w+)'\)", lambda m: repr(_OPERATORS.get(m.group(1), m.group(1))), reason
    )
    return reason.replace("found no matching overload", "no matching overload")


def to_json(value: Any, src: str = "") -> Any:
    """Convert a celpy value to plain JSON-compatible Python.

    Timestamps and durations become their CEL string form, bytes become base64 (as celpy's
    own JSON encoder does); map keys become strings. An error value nested in a list or
    map, or a value JSON cannot hold (NaN, infinity, a type), raises ExpressionError.
    """
    from celpy import celtypes
    from celpy.evaluation import CELEvalError

    if value is None:
        return None
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool | celtypes.BoolType):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ExpressionError(
                f"expression {src!r} produced {float(value)!r}, which JSON cannot hold",
                expression=src,
            )
        return float(value)
    if isinstance(value, celtypes.MapType | dict):
        return {_json_key(key, src): to_json(item, src) for key, item in value.items()}
    if isinstance(value, celtypes.ListType | list | tuple):
        return [to_json(item, src) for item in value]
    if isinstance(value, celtypes.TimestampType | celtypes.DurationType):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, CELEvalError):
        raise _evaluation_error(src, value)
    raise ExpressionError(
        f"expression {src!r} produced a {type(value).__name__}, which JSON cannot hold",
        expression=src,
    )


def _json_key(key: Any, src: str) -> str:
    converted = to_json(key, src)
    if isinstance(converted, str):
        return converted
    if isinstance(converted, bool):
        return "true" if converted else "false"
    if isinstance(converted, int | float):
        return str(converted)
    raise ExpressionError(f"expression {src!r} produced a map key {key!r}", expression=src)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "list" if isinstance(value, list) else "object"


# --------------------------------------------------------------------------- static analysis


def unwrap(node: Any) -> Any:
    """Skip the single-child precedence and parenthesis nodes down to the meaningful one."""
    from lark import Tree

    while isinstance(node, Tree) and node.data in _WRAPPERS and len(node.children) == 1:
        node = node.children[0]
    return node


def member_chain(node: Any) -> tuple[Any, list[tuple[str, Any]]]:
    """Split ``a.b[x].c`` into its base node and its accessors, outermost last.

    Each accessor is ``("field", name)`` or ``("index", expression_tree)``.
    """
    accessors: list[tuple[str, Any]] = []
    node = unwrap(node)
    while getattr(node, "data", None) in ("member_dot", "member_index"):
        if node.data == "member_dot":
            accessors.append(("field", str(node.children[1])))
        else:
            accessors.append(("index", node.children[1]))
        node = unwrap(node.children[0])
    accessors.reverse()
    return node, accessors


def root_name(node: Any) -> str | None:
    """The identifier of a bare ``ident`` node, else None."""
    node = unwrap(node)
    if getattr(node, "data", None) == "ident":
        return str(node.children[0])
    return None


def literal_value(node: Any) -> tuple[str, Any] | None:
    """``(kind, value)`` for a literal node (kind: null, bool, int, double, string), else None.

    String literals are decoded by celpy itself, so CEL's escapes and raw strings apply.
    A numeric literal under unary minus is folded. uint and bytes literals give None.
    """
    node = unwrap(node)
    data = getattr(node, "data", None)
    if data == "unary" and len(node.children) == 2 and node.children[0].data == "unary_neg":
        inner = literal_value(node.children[1])
        if inner is not None and inner[0] in ("int", "double"):
            return inner[0], -inner[1]
        return None
    if data != "literal":
        return None
    token = node.children[0]
    kind = {
        "NULL_LIT": "null",
        "BOOL_LIT": "bool",
        "INT_LIT": "int",
        "FLOAT_LIT": "double",
        "STRING_LIT": "string",
        "MLSTRING_LIT": "string",
    }.get(token.type)
    if kind is None:
        return None
    try:
        value = evaluate(str(token), {})
    except ExpressionError:
        return None
    if kind == "double" and not math.isfinite(value):
        return None
    return kind, value


def static_key(node: Any) -> str | None:
    """The key of ``m["key"]`` when the index is a string literal."""
    literal = literal_value(node)
    return literal[1] if literal is not None and literal[0] == "string" else None


def expression_paths(src: str) -> list[tuple[str, ...]]:
    """Every member path ``src`` references from a variable, in source order.

    A path is the tuple of static segments from the variable, e.g. ``("steps", "fetch",
    "output")`` for ``steps.fetch.output.items.size() > 0``. It stops at the first dynamic
    part: a computed or integer index (``items[0]``, ``m[trigger.key]``) or a call;
    ``m["key"]`` counts as the static segment ``key``. Every free identifier starts a path,
    including unknown ones (``order.total`` gives ``("order", "total")``) so that
    validation can report them; variables bound by macros (``exists(x, …)``) and CEL type
    names (``string``, ``int``…) do not. Duplicates are removed.
    """
    return list(_checked_facts(src).paths)


def _collect(node: Any, shadowed: frozenset[str]) -> Iterator[tuple[str, ...]]:
    from lark import Tree

    node = unwrap(node)
    if not isinstance(node, Tree):
        return
    if node.data in ("member_dot", "member_index", "ident"):
        base, accessors = member_chain(node)
        name = root_name(base)
        if name is not None:
            if name not in shadowed and name not in _TYPE_NAMES:
                yield (name, *_static_segments(accessors))
        else:
            yield from _collect(base, shadowed)
        for kind, accessor in accessors:
            if kind == "index":
                yield from _collect(accessor, shadowed)
        return
    if node.data == "member_dot_arg":
        receiver, method = node.children[0], str(node.children[1])
        args = list(node.children[2].children) if len(node.children) > 2 else []
        yield from _collect(receiver, shadowed)
        variable = root_name(args[0]) if args else None
        if method in MACROS and len(args) >= 2 and variable is not None:
            for arg in args[1:]:
                yield from _collect(arg, shadowed | {variable})
            return
        for arg in args:
            yield from _collect(arg, shadowed)
        return
    for child in node.children:
        yield from _collect(child, shadowed)


def _static_segments(accessors: list[tuple[str, Any]]) -> list[str]:
    segments: list[str] = []
    for kind, accessor in accessors:
        key = accessor if kind == "field" else static_key(accessor)
        if key is None:
            break
        segments.append(key)
    return segments
