"""Fixtures for the local-runtime tests: one runtime per test module, simple handlers."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from relayflow.errors import InvalidArgsError, TransientError
from relayflow.local import LocalRuntime


def echo(event: Any, context: Any) -> Any:
    return event


def fail_transient(event: Any, context: Any) -> Any:
    raise TransientError(f"upstream unavailable for {event.get('key')}")


def fail_invalid(event: Any, context: Any) -> Any:
    raise InvalidArgsError("amount must be positive")


def sleep(event: Any, context: Any) -> Any:
    time.sleep(float(event.get("seconds", 0.1)))
    return {"slept": event.get("seconds", 0.1), "item": event.get("item")}


class Flaky:
    """Fails with Relayflow.Transient ``failures`` times per key, then echoes."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, event: Any, context: Any) -> Any:
        key = str(event.get("key"))
        with self._lock:
            self.calls[key] = self.calls.get(key, 0) + 1
            attempt = self.calls[key]
        if attempt <= int(event.get("failures", 2)):
            raise TransientError(f"attempt {attempt} failed")
        return {"key": key, "attempt": attempt}


def _handlers() -> dict[str, Any]:
    return {
        "echo": echo,
        "fail-transient": fail_transient,
        "fail-invalid": fail_invalid,
        "sleep": sleep,
        "flaky": Flaky(),
    }


@pytest.fixture(scope="module")
def runtime() -> Iterator[LocalRuntime]:
    """A runtime shared by the tests of one module (tests run one at a time per process).

    If a runtime is already open in this process (a wider fixture), it is shared instead:
    only one can be open at a time.
    """
    current = LocalRuntime.current()
    if current is not None:
        for name, handler in _handlers().items():
            current.register_handler(name, handler)
        yield current
        return
    with LocalRuntime(_handlers()) as shared:
        yield shared


@pytest.fixture
def rt(runtime: LocalRuntime) -> Iterator[LocalRuntime]:
    """The module's runtime with a clean invocation log and the default time scale."""
    previous = runtime.time_scale
    runtime.reset_invocations()
    runtime.time_scale = 0.01
    yield runtime
    runtime.time_scale = previous
