"""The control plane: workflows, versions, runs, API keys and the run recorder.

Attributes load on first use (PEP 562): the API and the recorder import only what they need,
and ``relayflow.runner`` can share :mod:`relayflow.control.timeline` without the service.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from relayflow.control.recorder import record_status_change
    from relayflow.control.service import ControlPlane, get_control_plane

_EXPORTS = {
    "ControlPlane": "relayflow.control.service",
    "get_control_plane": "relayflow.control.service",
    "record_status_change": "relayflow.control.recorder",
}

__all__ = ["ControlPlane", "get_control_plane", "record_status_change"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'relayflow.control' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
