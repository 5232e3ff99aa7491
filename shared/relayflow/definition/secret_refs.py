"""Every secret a definition names, with where it names it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from relayflow.definition.step_models import SecretRef


def secret_refs(value: Any, path: str = "") -> Iterator[tuple[str, SecretRef]]:
    """``(path, ref)`` for each :class:`SecretRef` inside ``value`` (a workflow model or any
    part of one), depth first, in field order: ``steps.sign.secret``,
    ``http_tools.billing.auth.token``, ``notifications.webhooks[0].secret``."""
    if isinstance(value, SecretRef):
        yield path, value
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from secret_refs(getattr(value, name), f"{path}.{name}" if path else name)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from secret_refs(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from secret_refs(item, f"{path}[{index}]")
