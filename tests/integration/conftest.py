"""Fixtures most integration modules share: one platform runtime per module (the local runtime
with the Relayflow table and bus, ``relayflow_testing.platform_runtime``), a control plane on
it, and a fresh tenant per test. A module that needs another runtime defines its own
``runtime`` fixture, which ``plane`` then uses.

For the HTTP tier: one ``relayflow serve`` (:class:`LocalServer`) per module (``server``; its
time scale is the module's ``TIME_SCALE``, 0.001 unless the module sets one), a client with
its bootstrap key (``api``, tenant ``local``) and the CLI's ``--api``/``--api-key`` arguments
for it (``serve_cli``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from http_api import serve_cli_args
from relayflow_testing import bootstrap_client, platform_runtime

from relayflow.control.service import ControlPlane
from relayflow.local import LocalRuntime
from relayflow.local.serve import LocalServer


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


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest) -> Iterator[LocalServer]:
    with LocalServer(time_scale=getattr(request.module, "TIME_SCALE", 0.001)) as local:
        yield local


@pytest.fixture(scope="module")
def api(server: LocalServer) -> Iterator[httpx.Client]:
    with bootstrap_client(server) as client:
        yield client


@pytest.fixture
def serve_cli(server: LocalServer, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return serve_cli_args(server, monkeypatch)
