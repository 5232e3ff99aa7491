"""The values inside a definition (or any part of one), each with its path."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pydantic import BaseModel


def leaves(
    value: Any, path: str = "", *, models: bool = False, stop: type | tuple[type, ...] = ()
) -> Iterator[tuple[str, Any]]:
    """``(path, leaf)`` for each value inside ``value`` that is not a mapping, list or tuple
    (nor, with ``models``, a pydantic model other than a ``stop`` type), depth first, in order:
    ``steps.sign.secret``, ``notifications.webhooks[0].secret``, ``items[2]``."""
    children: Iterable[tuple[Any, Any]]
    if isinstance(value, stop):
        yield path, value
        return
    if models and isinstance(value, BaseModel):
        children = ((name, getattr(value, name)) for name in type(value).model_fields)
    elif isinstance(value, Mapping):
        children = value.items()
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from leaves(item, f"{path}[{index}]", models=models, stop=stop)
        return
    else:
        yield path, value
        return
    for key, item in children:
        yield from leaves(item, f"{path}.{key}" if path else str(key), models=models, stop=stop)
