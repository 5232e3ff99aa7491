"""Relayflow: workflow definitions compiled to AWS Step Functions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__version__ = "0.1.0"


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A package's PEP 562 ``__getattr__`` that loads each name of ``exports`` (name → the
    module that defines it) on first use and keeps it in the package, so importing the
    package imports none of those modules."""
    from importlib import import_module

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        setattr(import_module(package), name, value)
        return value

    return __getattr__
