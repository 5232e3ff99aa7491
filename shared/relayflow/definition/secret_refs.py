"""Every secret a definition names, with where it names it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from relayflow.definition.paths import leaves
from relayflow.definition.step_models import SecretRef


def secret_refs(value: Any, path: str = "") -> Iterator[tuple[str, SecretRef]]:
    """``(path, ref)`` for each :class:`SecretRef` inside ``value`` (a workflow model or any
    part of one), depth first, in field order: ``steps.sign.secret``,
    ``http_tools.billing.auth.token``, ``notifications.webhooks[0].secret``."""
    for where, leaf in leaves(value, path, models=True, stop=SecretRef):
        if isinstance(leaf, SecretRef):
            yield where, leaf
