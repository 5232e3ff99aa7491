"""Helpers for tests that talk to ``relayflow serve`` (a :class:`LocalServer`) over HTTP:
publish workflows, start runs and wait for their states or approvals, serve's admission clock,
and the CLI pointed at the server (in process or as its own process).

On pytest's ``pythonpath`` (pyproject.toml), so any test imports it by name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from relayflow_testing import FixedClock, eventually


def serve_cli_args(server: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The CLI's ``--api``/``--api-key`` arguments for ``server``'s bootstrap key, with the
    environment's API URL and key taken away so only these arguments count."""
    monkeypatch.delenv("RELAYFLOW_API_URL", raising=False)
    monkeypatch.delenv("RELAYFLOW_API_KEY", raising=False)
    return ["--api", server.url, "--api-key", server.bootstrap_key]


def cli_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> Any:
    """``relayflow <argv> --json`` run to exit 0, its standard output decoded."""
    from relayflow.cli.main import main

    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def publish(client: httpx.Client, *definitions: dict[str, Any]) -> None:
    """Each definition PUT at ``/workflows/<id>``, asserting it was created or updated."""
    for definition in definitions:
        put = client.put(f"/workflows/{definition['id']}", json=definition)
        assert put.status_code in (200, 201), put.text


def start_run(client: httpx.Client, workflow_id: str, payload: Any = None) -> str:
    """A run of ``workflow_id`` started with ``payload`` as its input (``{}`` when none),
    asserting the API answered 201; its run id."""
    started = client.post(f"/workflows/{workflow_id}/runs", json={"input": payload or {}})
    assert started.status_code == 201, started.text
    return started.json()["run_id"]


def run_ids(client: httpx.Client, workflow_id: str) -> set[str]:
    """The ids of ``workflow_id``'s runs (the first page of 100)."""
    page = client.get(f"/workflows/{workflow_id}/runs", params={"limit": 100})
    assert page.status_code == 200, page.text
    return {run["run_id"] for run in page.json()["items"]}


def finished_run(client: httpx.Client, run_id: str, timeout: float = 30.0) -> dict[str, Any]:
    """``GET /runs/<run_id>`` once the run's status is no longer ``running``."""

    def find() -> dict[str, Any] | None:
        run = client.get(f"/runs/{run_id}").json()
        return run if run["status"] != "running" else None

    return eventually(find, timeout=timeout)


def run_in_status(client: httpx.Client, run_id: str, *statuses: str) -> dict[str, Any]:
    """``GET /runs/<run_id>`` once the run's status is one of ``statuses``."""

    def find() -> dict[str, Any] | None:
        run = client.get(f"/runs/{run_id}").json()
        return run if run["status"] in statuses else None

    return eventually(find, timeout=30.0)


@contextmanager
def admission_clock(server: Any, now: float) -> Iterator[FixedClock]:
    """``server``'s admission reads the time from a :class:`FixedClock` set to ``now`` (the
    test moves it), back to ``time.time`` on the way out."""
    admission = server.control().admission
    clock = FixedClock(now)
    admission.clock = clock
    try:
        yield clock
    finally:
        admission.clock = time.time


def order_event_delivery(
    tenant: str, workflow_id: str, event_id: str, detail: dict[str, Any]
) -> dict[str, Any]:
    """A trigger delivery of a ``shop``/``order.created`` event (id ``event_id``, with
    ``detail`` and the tenant field) to ``workflow_id``'s first trigger, as the bus rule
    sends it to the trigger function."""
    from relayflow.triggers.sync import TENANT_FIELD

    return {
        "kind": "event",
        "tenant": tenant,
        "workflow_id": workflow_id,
        "trigger_index": 0,
        "event": {
            "id": event_id,
            "source": "shop",
            "detail-type": "order.created",
            "detail": {**detail, TENANT_FIELD: tenant},
        },
    }


def relayflow_command(*args: str) -> list[str]:
    """``relayflow <args>`` as a command line of this interpreter (no console script needed)."""
    return [
        sys.executable,
        "-c",
        "import sys; from relayflow.cli.main import main; sys.exit(main())",
        *args,
    ]


def read_banner(process: subprocess.Popen[str], last: str, timeout: float = 120.0) -> str:
    """The lines ``relayflow serve`` printed on start, up to the one starting with ``last``;
    fails if the process exits first."""
    assert process.stdout is not None
    banner: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        assert line, f"serve exited: {banner}"
        banner.append(line.rstrip())
        if line.startswith(last):
            break
    return "\n".join(banner)


def serve_process(argv: list[str]) -> subprocess.Popen[str]:
    """``argv`` (a ``relayflow serve`` command line) started in its own process, its standard
    output a text pipe read line by line as it prints (unbuffered), its errors discarded."""
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def stored_approval(tenant: str, run_id: str, timeout: float = 30.0) -> Any:
    """The stored approval item the run asked for, once it asked (the server runs in this
    process: its wait service and table are this process's)."""
    from relayflow.control.waits import get_wait_service
    from relayflow.dal.waits import WaitDal

    def asked() -> Any:
        for view in get_wait_service().list_approvals(tenant, limit=100).items:
            if view.run_id == run_id:
                return WaitDal().get_approval(tenant, view.approval_id)
        return None

    return eventually(asked, timeout=timeout)
