"""Scaled, interruptible time for the local runtime.

Wait states and Retry back-off sleeps are multiplied by one process-wide factor, the
``time_scale`` of the running :class:`~relayflow.local.runtime.LocalRuntime` (0.01 by default: a
300 s Wait takes 3 s). Every scaled sleep also wakes at once when its execution stops, times out
or fails elsewhere, so ``stop_execution`` never waits for a timer to run out.

Task ``TimeoutSeconds``, ``HeartbeatSeconds`` and the state machine's ``TimeoutSeconds`` are not
scaled: they bound real work (a handler that really runs), so they stay in real seconds. One
exception, :func:`task_timeout`: a park's callback Task (``<step>.park``), whose timeout is a
person's deadline (``park_timeout``), not a bound on work, is scaled like a Wait.
"""

from __future__ import annotations

import threading
import time
from typing import Any

DEFAULT_TIME_SCALE = 0.01

_lock = threading.Lock()
_time_scale = DEFAULT_TIME_SCALE
_WAITERS_ATTR = "_relayflow_halt_waiters"


def set_time_scale(scale: float) -> None:
    """Set the factor applied to Wait and Retry sleeps (1.0 is real time)."""
    if scale < 0:
        raise ValueError(f"time_scale must be >= 0, got {scale}")
    global _time_scale
    _time_scale = float(scale)


def get_time_scale() -> float:
    return _time_scale


def scaled(seconds: float) -> float:
    """``seconds`` of ASL time expressed in wall-clock seconds."""
    return max(0.0, seconds) * _time_scale


#: A park's callback Task is named ``<step key>.park`` (:mod:`relayflow.compiler.on_error`);
#: step keys hold no ``.``, so no other state ends so.
PARK_STATE_SUFFIX = ".park"
#: A scaled park timeout lasts at least this many real seconds (or its own length when
#: shorter): the waitpoint function's invocation that stores the park runs inside it.
PARK_FLOOR_SECONDS = 1.0


def task_timeout(state_name: str, timeout_seconds: float | None) -> float | None:
    """The real seconds the Task ``state_name`` may take before it times out: its
    ``TimeoutSeconds`` as is, except a park's, which is scaled (see the module docstring)."""
    if timeout_seconds is None or not state_name.endswith(PARK_STATE_SUFFIX):
        return timeout_seconds
    return max(scaled(timeout_seconds), min(float(timeout_seconds), PARK_FLOOR_SECONDS))


def _waiters(env: Any) -> set[threading.Event]:
    with _lock:
        waiters = env.__dict__.get(_WAITERS_ATTR)
        if waiters is None:
            waiters = set()
            env.__dict__[_WAITERS_ATTR] = waiters
        return waiters


def notify_halted(env: Any) -> None:
    """Wake every wait registered on ``env``; called when its program state leaves RUNNING."""
    with _lock:
        waiters = list(env.__dict__.get(_WAITERS_ATTR, ()))
    for event in waiters:
        event.set()


def wait_event(env: Any, event: threading.Event, timeout: float | None) -> bool:
    """Wait for ``event`` for up to ``timeout`` real seconds, or until ``env`` halts.

    A halt sets ``event`` too, so the caller tells a halt apart with ``env.is_running()``
    (a halt always leaves the RUNNING state). Returns whether ``event`` is set.
    """
    waiters = _waiters(env)
    with _lock:
        waiters.add(event)
    try:
        if not env.is_running():
            return event.is_set()
        return event.wait(timeout)
    finally:
        with _lock:
            waiters.discard(event)


def sleep(env: Any, asl_seconds: float) -> None:
    """Sleep ``asl_seconds`` of ASL time, scaled, unless ``env`` halts first."""
    remaining = scaled(asl_seconds)
    deadline = time.monotonic() + remaining
    wake = threading.Event()
    while remaining > 0 and env.is_running():
        wake.clear()
        wait_event(env, wake, remaining)
        remaining = deadline - time.monotonic()
