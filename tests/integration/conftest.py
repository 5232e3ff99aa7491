"""Fixtures most integration modules share: one platform runtime per module (the local runtime
with the Relayflow table and bus, ``relayflow_testing.platform_runtime``), a control plane on
it, and a fresh tenant per test. A module that needs another runtime defines its own
``runtime`` fixture, which ``plane`` then uses."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from relayflow_testing import platform_runtime

from relayflow.control.service import ControlPlane
from relayflow.local import LocalRuntime


@pytest.fixture(scope="module")
def runtime() -> Iterator[LocalRuntime]:
    with platform_runtime() as rt:
        yield rt


@pytest.fixture
def plane(runtime: LocalRuntime) -> ControlPlane:
    return ControlPlane()


@pytest.fixture
def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"
