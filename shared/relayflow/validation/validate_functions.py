"""Validation rule ``unknown-function``: an expression calls a function that the CEL
environment does not define (``sum(xs)``, ``xs.sum()``). CEL parses any call, so without
this rule the mistake surfaced only when a run evaluated the expression
(``Relayflow.ExpressionError: undeclared reference to 'sum'``). Part of
:mod:`relayflow.validation.validate`'s one pass; the environment is
:mod:`relayflow.expressions.cel`'s.
"""

from __future__ import annotations

from functools import lru_cache

#: Calls the evaluator resolves itself rather than through its function table.
_SPECIAL_CALLS = frozenset({"has", "dyn"})


@lru_cache(maxsize=1)
def known_functions() -> frozenset[str]:
    """Every function and macro name an expression may call."""
    from celpy.evaluation import base_functions

    from relayflow.expressions.cel import MACROS

    named = {name for name in base_functions if name.isidentifier()}
    return frozenset(named | MACROS | _SPECIAL_CALLS)


def unknown_functions(src: str) -> list[str]:
    """The names ``src`` calls that no function or macro of the environment defines, in
    source order (each once). A source that does not parse has none (its syntax is the
    ``expression`` / ``template`` rule's problem)."""
    from lark import Token, Tree

    from relayflow.expressions.cel import parse

    try:
        tree = parse(src)
    except ValueError:
        return []
    known = known_functions()
    found: list[str] = []
    for node in tree.iter_subtrees_topdown():
        if node.data == "ident_arg":
            name = node.children[0]
        elif node.data == "member_dot_arg":
            name = node.children[1]
        else:
            continue
        if isinstance(name, Tree) or not isinstance(name, Token | str):
            continue
        if str(name) not in known and str(name) not in found:
            found.append(str(name))
    return found
