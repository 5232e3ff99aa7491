"""A derandomized corpus of Hypothesis examples: the same list on every run, checkout and
machine (used with :mod:`workflow_strategies`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st


def draw_corpus(strategy: st.SearchStrategy[Any], count: int) -> list[Any]:
    """``count`` examples of ``strategy``, the same list on every run: Hypothesis derandomized
    (its seed derives from this function), no example database, no shrinking, and no "local
    constants" (see :func:`_without_local_constants`)."""
    drawn: list[Any] = []

    @settings(
        max_examples=count,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(example: Any) -> None:
        drawn.append(example)

    with _without_local_constants():
        collect()
    return drawn


@contextmanager
def _without_local_constants() -> Iterator[None]:
    """Hypothesis sometimes draws a literal found in the source of the *local* modules loaded
    so far (``providers._get_local_constants``). Which modules those are depends on the
    checkout's path and on what the process imported before (an xdist worker's earlier
    tests), so a derandomized corpus would still differ between runs and machines. Drawing
    from the global constants only (the random stream is consumed the same way) makes it the
    same everywhere. This is Hypothesis internals, pinned by its version in pyproject.toml."""
    from hypothesis.internal.conjecture import providers

    empty = providers.Constants(
        integers=providers.SortedSet(),
        floats=providers.SortedSet(key=providers.float_to_int),
        bytes=providers.SortedSet(),
        strings=providers.SortedSet(),
    )
    original = providers._get_local_constants
    providers.CONSTANTS_CACHE.cache.clear()
    providers._get_local_constants = lambda: empty
    try:
        yield
    finally:
        providers._get_local_constants = original
        providers.CONSTANTS_CACHE.cache.clear()
