"""Syntax of the strings inside an ASL definition: JSONPath paths, intrinsic function calls and
RFC 3339 timestamps, as the Amazon States Language specification and the Step Functions
documentation define them. Pure recognisers used by :mod:`relayflow.compiler.check`: each
returns ``None`` for a valid string, or one sentence saying what is wrong.

A small hand-written recogniser rather than a JSONPath library: the Lambda layer ships none,
and the ASL's own restrictions (Reference Paths, the ``$$`` context root, the intrinsic
grammar) are not any library's anyway.
"""

from __future__ import annotations

import datetime
import re

#: Every intrinsic function the JSONPath query language knows, with (fewest, most) arguments
#: (``None``: no upper bound). Source: "Intrinsic functions for JSONPath states".
INTRINSIC_ARITY: dict[str, tuple[int, int | None]] = {
    "States.Format": (1, None),
    "States.StringToJson": (1, 1),
    "States.JsonToString": (1, 1),
    "States.Array": (0, None),
    "States.ArrayPartition": (2, 2),
    "States.ArrayContains": (2, 2),
    "States.ArrayRange": (3, 3),
    "States.ArrayGetItem": (2, 2),
    "States.ArrayLength": (1, 1),
    "States.ArrayUnique": (1, 1),
    "States.Base64Encode": (1, 1),
    "States.Base64Decode": (1, 1),
    "States.Hash": (2, 2),
    "States.JsonMerge": (3, 3),
    "States.MathRandom": (2, 3),
    "States.MathAdd": (2, 2),
    "States.StringSplit": (2, 2),
    "States.UUID": (0, 0),
}
#: "You can nest up to 10 intrinsic functions within a field": the documentation's example of
#: "nine nested intrinsic functions" counts every call in the field, so this is a count of calls.
MAX_INTRINSICS_PER_FIELD = 10
#: Characters a backslash may escape inside an intrinsic string literal (the reserved ones).
_INTRINSIC_ESCAPES = frozenset("'{}\\")

# A dot-notation member name: anything but the characters JSONPath gives a meaning to.
_NAME = re.compile(r"[^.\[\]()'\",?*@\s]+")
_CALL_NAME = re.compile(r"States\.[A-Za-z0-9]+", re.ASCII)
_INDEX = re.compile(r"-?[0-9]+", re.ASCII)
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?", re.ASCII)
# RFC 3339 date-time with the ASL's restrictions: an uppercase T, and Z or a numeric offset.
# re.ASCII: ``\d`` alone would also match other scripts' digits ("١٢").
_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-](\d{2}):(\d{2}))", re.ASCII
)


class _SyntaxProblem(Exception):
    """One sentence about the first thing wrong in a string."""


# --------------------------------------------------------------------------------------------
# JSONPath
# --------------------------------------------------------------------------------------------


def path_problem(text: object, *, reference: bool = False, context: bool = True) -> str | None:
    """What is wrong with ``text`` as an ASL Path (``reference``: as a Reference Path, which
    names one node: no ``..``, ``*``, slices, unions or filters). ``context=False`` refuses the
    context object root ``$$``. ``None`` when it is valid."""
    if not isinstance(text, str):
        return f"must be a string path, not {type(text).__name__}"
    try:
        _scan_path(text, 0, reference=reference, context=context, stop="")
    except _SyntaxProblem as exc:
        return f"{text!r} is not a valid {'reference path' if reference else 'path'}: {exc}"
    return None


def _scan_path(text: str, i: int, *, reference: bool, context: bool, stop: str) -> int:
    """Recognise one path starting at ``i``; returns the index after it. ``stop`` names the
    characters that end the path at the top level (inside an intrinsic: ``,`` and ``)``)."""
    if text.startswith("$$", i):
        if not context:
            raise _SyntaxProblem("the context object ($$) cannot be used here")
        i += 2
    elif text.startswith("$", i):
        i += 1
    else:
        raise _SyntaxProblem("a path starts with $")
    while i < len(text) and text[i] not in stop:
        if text.startswith("..", i):
            if reference:
                raise _SyntaxProblem("'..' (deep scan) selects many nodes")
            i += 2
            if i < len(text) and text[i] == "[":
                i = _scan_bracket(text, i, reference=reference)
            else:
                i = _scan_member(text, i, reference=reference)
        elif text[i] == ".":
            i = _scan_member(text, i + 1, reference=reference)
        elif text[i] == "[":
            i = _scan_bracket(text, i, reference=reference)
        else:
            raise _SyntaxProblem(f"unexpected {text[i]!r} at offset {i}")
    return i


def _scan_member(text: str, i: int, *, reference: bool) -> int:
    if text.startswith("*", i):
        if reference:
            raise _SyntaxProblem("'*' selects many nodes")
        return i + 1
    match = _NAME.match(text, i)
    if match is None:
        raise _SyntaxProblem(f"a member name is missing at offset {i}")
    return match.end()


def _scan_bracket(text: str, i: int, *, reference: bool) -> int:
    j = i + 1
    if text.startswith("?(", j):
        if reference:
            raise _SyntaxProblem("a filter selects many nodes")
        j = _skip_balanced(text, j + 1)
    elif text.startswith("*", j):
        if reference:
            raise _SyntaxProblem("'*' selects many nodes")
        j += 1
    elif j < len(text) and text[j] in "'\"":
        j = _skip_quoted(text, j)
        while text.startswith(",", j):
            if reference:
                raise _SyntaxProblem("a union selects many nodes")
            j = _skip_quoted(text, j + 1)
    else:
        j = _scan_indexes(text, j, reference=reference)
    if not text.startswith("]", j):
        raise _SyntaxProblem(f"']' expected at offset {j}")
    return j + 1


def _scan_indexes(text: str, j: int, *, reference: bool) -> int:
    """An index, an index union (``0,2``) or a slice (``1:3``, ``::2``)."""
    match = _INDEX.match(text, j)
    if match is not None:
        j = match.end()
        if reference and not (text.startswith("]", j) and not match.group().startswith("-")):
            raise _SyntaxProblem("a reference path indexes one array item, as [n] with n ≥ 0")
        if text.startswith(",", j):
            while text.startswith(",", j):
                match = _INDEX.match(text, j + 1)
                if match is None:
                    raise _SyntaxProblem(f"an index is missing at offset {j + 1}")
                j = match.end()
            return j
    elif not text.startswith(":", j):
        raise _SyntaxProblem(f"an index, a quoted name, '*' or a filter expected at offset {j}")
    for _ in range(2):  # the slice's end and step
        if not text.startswith(":", j):
            break
        if reference:
            raise _SyntaxProblem("a slice selects many nodes")
        match = _INDEX.match(text, j + 1)
        j = match.end() if match else j + 1
    return j


def _skip_quoted(text: str, j: int) -> int:
    if j >= len(text) or text[j] not in "'\"":
        raise _SyntaxProblem(f"a quoted name expected at offset {j}")
    quote, j = text[j], j + 1
    while j < len(text):
        if text[j] == "\\":
            j += 2
        elif text[j] == quote:
            return j + 1
        else:
            j += 1
    raise _SyntaxProblem("an unterminated quoted name")


def _skip_balanced(text: str, j: int) -> int:
    """Skip ``( … )`` starting at ``text[j] == '('``, quotes included."""
    depth = 0
    while j < len(text):
        char = text[j]
        if char in "'\"":
            j = _skip_quoted(text, j)
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    raise _SyntaxProblem("an unbalanced '(' in a filter")


# --------------------------------------------------------------------------------------------
# Intrinsic functions
# --------------------------------------------------------------------------------------------


def intrinsic_problem(text: str) -> tuple[str | None, int]:
    """``(problem, calls)`` for ``text`` as one intrinsic function call (``States.X(…)``):
    the problem is ``None`` when it parses (known function names, argument counts, string
    literals with only the reserved characters escaped, valid path arguments); ``calls`` is
    how many intrinsic functions the field holds, nested ones included."""
    counter = [0]
    try:
        end = _scan_call(text, 0, counter)
        end = _skip_space(text, end)
        if end != len(text):
            raise _SyntaxProblem(f"unexpected text after the call at offset {end}")
    except _SyntaxProblem as exc:
        return f"{text!r} is not a valid intrinsic function call: {exc}", counter[0]
    return None, counter[0]


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _scan_call(text: str, i: int, counter: list[int]) -> int:
    match = _CALL_NAME.match(text, i)
    if match is None:
        raise _SyntaxProblem(f"an intrinsic function name (States.…) expected at offset {i}")
    name = match.group()
    if name not in INTRINSIC_ARITY:
        raise _SyntaxProblem(f"{name} is not an intrinsic function")
    counter[0] += 1
    i = _skip_space(text, match.end())
    if not text.startswith("(", i):
        raise _SyntaxProblem(f"'(' expected after {name}")
    i = _skip_space(text, i + 1)
    count = 0
    if text.startswith(")", i):
        i += 1
    else:
        while True:
            i = _skip_space(text, _scan_argument(text, i, counter))
            count += 1
            if text.startswith(",", i):
                i = _skip_space(text, i + 1)
            elif text.startswith(")", i):
                i += 1
                break
            else:
                raise _SyntaxProblem(f"',' or ')' expected in {name}(…) at offset {i}")
    fewest, most = INTRINSIC_ARITY[name]
    if count < fewest or (most is not None and count > most):
        wanted = f"{fewest}" if fewest == most else f"{fewest} to {most or 'any number of'}"
        raise _SyntaxProblem(f"{name} takes {wanted} argument(s), not {count}")
    return i


def _scan_argument(text: str, i: int, counter: list[int]) -> int:
    if text.startswith("'", i):
        return _scan_literal(text, i)
    if text.startswith("States.", i):
        return _scan_call(text, i, counter)
    if text.startswith("$", i):
        return _scan_path(text, i, reference=False, context=True, stop=", \t\r\n)")
    for word in ("true", "false", "null"):
        if text.startswith(word, i):
            return i + len(word)
    match = _NUMBER.match(text, i)
    if match is not None:
        return match.end()
    raise _SyntaxProblem(f"an argument (string, number, boolean, null, path or call) at {i}")


def _scan_literal(text: str, i: int) -> int:
    j = i + 1
    while j < len(text):
        char = text[j]
        if char == "\\":
            if j + 1 >= len(text) or text[j + 1] not in _INTRINSIC_ESCAPES:
                escaped = text[j + 1 : j + 2] or "end of text"
                raise _SyntaxProblem(
                    f"'\\{escaped}' at offset {j}: only ' {{ }} and \\ may be escaped"
                )
            j += 2
        elif char == "'":
            return j + 1
        else:
            j += 1
    raise _SyntaxProblem("an unterminated string literal")


# --------------------------------------------------------------------------------------------
# Timestamps
# --------------------------------------------------------------------------------------------


def timestamp_problem(text: object) -> str | None:
    """What is wrong with ``text`` as an ASL timestamp: RFC 3339 with an uppercase ``T`` and
    ``Z`` or a numeric offset, a real calendar date and time (no 30 February, no hour 24),
    an offset within ±23:59, ASCII digits only. ``None`` when it is valid."""
    if not isinstance(text, str):
        return f"must be an RFC 3339 timestamp string, not {type(text).__name__}"
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        return (
            f"{text!r} is not an RFC 3339 timestamp (YYYY-MM-DDThh:mm:ss[.fff] with Z or ±hh:mm, "
            "ASCII digits)"
        )
    year, month, day, hour, minute, second = (int(match.group(n)) for n in range(1, 7))
    try:
        datetime.datetime(year, month, day, hour, minute, second)
    except ValueError as exc:
        return f"{text!r} is not a real date and time: {exc}"
    if match.group(9) is not None and (int(match.group(9)) > 23 or int(match.group(10)) > 59):
        return f"{text!r} has an offset outside ±23:59"
    return None
