"""No test asserts an upper bound on wall-clock time (docs/development.md, "Testing").

A loaded 2-core CI machine makes any step slower by an unknown factor, so ``assert elapsed < 6``
fails there although the code is right. Tests assert state instead: what the runtime was asked
to sleep (``relayflow_testing.record_scaled_sleeps``), statuses, stored items. Lower bounds
stay allowed (a wait that really waited holds however slow the machine), and so do polling
guards (``while time.monotonic() < deadline``: not an ``assert``) and tolerances on a computed
value (``abs(item["expires_at"] - (time.time() + ttl)) < 60``: the stored expiry is compared
with "now + TTL", not a time the test measured).

What counts as a measured time, in an ``assert``:
- a difference that subtracts a clock reading: ``time.monotonic() - started``, or
  ``due - before`` where ``before`` was assigned a clock reading (``before - 60`` is a
  moment, not a time taken);
- a ``.total_seconds()`` call, a ``duration_ms``, ``ended_at`` or ``elapsed`` attribute or key
  (what the runtime recorded it took), unless compared with another recorded time (ordering);
- a name assigned (or iterated) from any of these.
An offence is one of them on the small side of ``<``/``<=`` (or the big side of ``>``/``>=``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
CLOCKS = {"monotonic", "perf_counter", "time", "now", "utcnow", "monotonic_ns", "time_ns"}
RECORDED = {"duration_ms", "ended_at", "elapsed", "elapsed_ms"}
TIMESTAMPS = RECORDED | {"started_at", "stopped_at", "at", "at_ms"}
UPPER = (ast.Lt, ast.LtE)
LOWER = (ast.Gt, ast.GtE)


def _is_clock(node: ast.AST) -> bool:
    """``time.monotonic()``, ``perf_counter()``, ``datetime.now(UTC)``… (a clock reading)."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name in CLOCKS


def _field(node: ast.AST) -> str | None:
    """The name of an attribute or a constant subscript key: ``x.duration_ms``,
    ``x["duration_ms"]``, ``x.state("W").duration_ms``."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return str(node.slice.value)
    return None


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a module or function, without those of the functions defined in it (each
    is a scope of its own, so a name in one test says nothing of the same name in another)."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _FUNCTIONS):
            stack.extend(ast.iter_child_nodes(node))


class _Scope:
    """The names of one function (or module) bound to clock readings and to measured times."""

    def __init__(self, body: ast.AST) -> None:
        self.readings: set[str] = set()
        self.measured: set[str] = set()
        for _ in range(3):  # names bound from names bound earlier: a few rounds settle it
            for node in _own_nodes(body):
                for targets, value in _bindings(node):
                    names = {t.id for t in targets for t in ast.walk(t) if isinstance(t, ast.Name)}
                    if _is_clock(value):
                        self.readings |= names
                    elif self.is_measured(value, anywhere=True):
                        self.measured |= names

    def is_reading(self, node: ast.AST) -> bool:
        return _is_clock(node) or (isinstance(node, ast.Name) and node.id in self.readings)

    def is_measured(self, node: ast.AST, *, anywhere: bool = False) -> bool:
        """``node`` is a measured time (or, with ``anywhere``, holds one somewhere inside)."""
        candidates = ast.walk(node) if anywhere else iter([node])
        for sub in candidates:
            if isinstance(sub, ast.Name) and sub.id in self.measured:
                return True
            # (``reading - 60`` is a moment, not a time taken)
            is_sub = isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Sub)
            if is_sub and self.is_reading(sub.right):
                return True
            if isinstance(sub, ast.Call) and _field(sub.func) == "total_seconds":
                return True
            if _field(sub) in RECORDED:
                return True
        return False

    def is_recorded_time(self, node: ast.AST) -> bool:
        """Another recorded time: comparing two of them is an ordering, not a bound."""
        return _field(node) in TIMESTAMPS or self.is_reading(node)


def _bindings(node: ast.AST) -> Iterator[tuple[list[ast.AST], ast.AST]]:
    if isinstance(node, ast.Assign):
        yield node.targets, node.value
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
        yield [node.target], node.value
    elif isinstance(node, (ast.For, ast.comprehension)):
        target, values = node.target, node.iter
        is_zip = isinstance(values, ast.Call) and getattr(values.func, "id", None) == "zip"
        if is_zip and isinstance(target, ast.Tuple) and len(target.elts) == len(values.args):
            for one, value in zip(target.elts, values.args, strict=True):  # zip's pairs
                yield [one], value
        else:
            yield [target], values
    elif isinstance(node, ast.NamedExpr):
        yield [node.target], node.value


def _upper_bounds(compare: ast.Compare, scope: _Scope) -> Iterator[ast.AST]:
    """The measured operands of ``compare`` that it bounds from above."""
    operands = [compare.left, *compare.comparators]
    for op, small, big in zip(compare.ops, operands[:-1], operands[1:], strict=True):
        if isinstance(op, UPPER):
            bounded, bound = small, big
        elif isinstance(op, LOWER):
            bounded, bound = big, small
        else:
            continue
        if scope.is_measured(bounded, anywhere=True) and not (
            scope.is_recorded_time(bound) or scope.is_measured(bound, anywhere=True)
        ):
            yield bounded


def wall_clock_bounds(source: str) -> list[tuple[int, str]]:
    """(line, text) of every ``assert`` in ``source`` that bounds a measured time from above."""
    tree = ast.parse(source)
    found: list[tuple[int, str]] = []
    for body in [tree, *(n for n in ast.walk(tree) if isinstance(n, _FUNCTIONS))]:
        scope = _Scope(body)
        for node in _own_nodes(body):
            if not isinstance(node, ast.Assert):
                continue
            for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
                if any(True for _ in _upper_bounds(compare, scope)):
                    found.append((node.lineno, ast.unparse(node.test)))
    return sorted(set(found))


def test_no_test_asserts_an_upper_bound_on_wall_clock_time() -> None:
    # Given every test module
    offences = [
        f"{path.relative_to(TESTS)}:{line}: assert {text}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, text in wall_clock_bounds(path.read_text())
    ]
    # Then none bounds a measured time from above
    assert offences == [], "assert state, not how long it took:\n" + "\n".join(offences)


@pytest.mark.parametrize(
    "source",
    [
        "def t():\n    started = time.monotonic()\n    run()\n"
        "    elapsed = time.monotonic() - started\n    assert 1.8 <= elapsed < 15\n",
        "def t():\n    s = time.perf_counter()\n    assert time.perf_counter() - s < 1\n",
        "def t():\n    assert 250 <= record.state('pause').duration_ms < 2000\n",
        "def t():\n    assert record['duration_ms'] <= 500\n",
        "def t():\n    t0 = time.time()\n    assert run() and 6 > time.time() - t0\n",
        "def t():\n    before = datetime.now(UTC)\n    assert due - before < timedelta(3)\n",
        "def t():\n    assert record.state('W').ended_at < target + timedelta(seconds=1)\n",
        "def t():\n    started = time.time()\n    assert lease['until'] / 1000 - started <= 26\n",
        "def t():\n    gaps = [(s - f).total_seconds() for f, s in pairs]\n"
        "    for gap, expected in zip(gaps, (0.02, 0.04)):\n        assert gap < expected + 0.5\n",
    ],
)
def test_an_upper_bound_on_a_measured_time_is_found(source: str) -> None:
    assert len(wall_clock_bounds(source)) == 1, source


@pytest.mark.parametrize(
    "source",
    [
        # a polling guard, and a lower bound
        "def t():\n    deadline = time.monotonic() + 30\n    while time.monotonic() < deadline:\n"
        "        poll()\n    assert time.monotonic() - started >= 2.9\n",
        "def t():\n    assert record.state('W').duration_ms >= 2900\n",
        # a tolerance on a computed expiry, and an ordering of recorded times
        "def t():\n    assert abs(item['expires_at'] - (time.time() + 30 * 86_400)) < 60\n",
        "def t():\n    assert call.started_at <= call.ended_at <= record.stopped_at\n",
        "def t():\n    assert steps[0].ended_at <= boom.started_at\n",
        # what the runtime was asked to sleep is state, not a measurement
        "def t():\n    assert 0 < ahead[1] <= 2.75\n",
        "def t():\n    before = time.time()\n    assert at >= time.gmtime(before - 60)\n",
        # a name measured in one test is another test's own
        "def t():\n    s = time.time()\n    size = time.time() - s\n"
        "def u():\n    assert size < 10\n",
    ],
)
def test_guards_lower_bounds_tolerances_and_orderings_are_allowed(source: str) -> None:
    assert wall_clock_bounds(source) == [], source
