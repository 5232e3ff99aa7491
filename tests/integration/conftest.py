"""Fixtures most integration modules share: one platform runtime per module (the local runtime
with the Relayflow table and bus, ``relayflow_testing.platform_runtime``), a control plane on
it, and a fresh tenant per test. A module that needs another runtime defines its own
``runtime`` fixture, which ``plane`` then uses, or sets ``BARE_RUNTIME = True`` for a local
runtime (time scaled 1/1000) without the Relayflow table and bus. ``fixtures`` writes the
scripted AI fixtures of a test (``scripted_ai.scripted_turns``).

For the HTTP tier: one ``relayflow serve`` (:class:`LocalServer`) per module (``server``; its
time scale is the module's ``TIME_SCALE``, 0.001 unless the module sets one), a client with
its bootstrap key (``api``, tenant ``local``; a module that sets ``UNTHROTTLED = True`` gets a
server whose rate limit lets bursts through, and one that sets ``WITH_REMOTE = True`` gets
``remote`` started first, so the server's settings let it reach that recording server), the
CLI's ``--api``/``--api-key`` arguments for it (``cli``), and ``remote``: a recording
HTTP server on 127.0.0.1 the SSRF guard lets product code reach."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from http_api import serve_cli_args
from relayflow_testing import Server, allowed_server, bootstrap_client, platform_runtime
from scripted_ai import scripted_turns

from relayflow.control.service import ControlPlane
from relayflow.local import LocalRuntime
from relayflow.local.serve import LocalServer


@pytest.fixture(scope="module")
def runtime(request: pytest.FixtureRequest) -> Iterator[LocalRuntime]:
    if getattr(request.module, "BARE_RUNTIME", False):
        with LocalRuntime(time_scale=0.001) as rt:
            yield rt
        return
    with platform_runtime() as rt:
        yield rt


@pytest.fixture
def fixtures(tmp_path: Path) -> Iterator[Callable[..., str]]:
    with scripted_turns(tmp_path) as write:
        yield write


@pytest.fixture
def plane(runtime: LocalRuntime) -> ControlPlane:
    return ControlPlane()


@pytest.fixture
def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def remote() -> Iterator[Server]:
    with allowed_server() as recording:
        yield recording


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest) -> Iterator[LocalServer]:
    if getattr(request.module, "WITH_REMOTE", False):
        request.getfixturevalue("remote")
    with LocalServer(time_scale=getattr(request.module, "TIME_SCALE", 0.001)) as local:
        if getattr(request.module, "UNTHROTTLED", False):
            local.set_rate_limit(per_second=1000, burst=10_000)
        yield local


@pytest.fixture(scope="module")
def api(server: LocalServer) -> Iterator[httpx.Client]:
    with bootstrap_client(server) as client:
        yield client


@pytest.fixture
def cli(server: LocalServer, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return serve_cli_args(server, monkeypatch)
