"""``relayflow deploy``, ``runs``, ``keys`` and ``serve`` against a local control API: output
and exit codes, called in-process through main() (and ``serve`` as a real process)."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import httpx
import pytest
from http_api import cli_json, serve_process
from relayflow_testing import HTTP_TIMEOUT

from relayflow.cli.main import main

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TRIAGE = str(ROOT / "workflows/examples/order_triage.yaml")
PAYMENT = str(ROOT / "workflows/examples/payment_retry.yaml")
TRIAGE_INPUT = "@" + str(ROOT / "events/examples/order_triage.json")


def wait_for_end(capsys, cli: list[str], run_id: str, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = cli_json(capsys, ["runs", "get", run_id, *cli])
        if run["status"] != "running":
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not end")


def test_deploy_registers_each_file_and_prints_its_version(cli, capsys):
    # When two example workflows are deployed
    assert main(["deploy", TRIAGE, PAYMENT, *cli]) == 0
    out = capsys.readouterr().out
    # Then each is reported with its id and live version
    assert f"✓ {TRIAGE}: workflow 'order-triage' created, version 1 (live 1)" in out
    assert "workflow 'payment-retry'" in out
    assert "warning:" not in out  # its webhook trigger is registered, not just stored
    # And deploying the same file again publishes nothing new
    assert main(["deploy", TRIAGE, *cli]) == 0
    assert "'order-triage' updated, version 1 (live 1)" in capsys.readouterr().out


def test_deploy_registers_a_sub_workflows_child_before_its_parent(cli, capsys):
    # When the parent is named before the child it starts
    parent = str(ROOT / "workflows/examples/order_shipping.yaml")
    child = str(ROOT / "workflows/examples/shipping_quote.yaml")
    assert main(["deploy", parent, child, *cli]) == 0
    # Then the child is registered first, so the parent's child exists when it is checked
    out = capsys.readouterr().out
    assert out.index("'shipping-quote' created") < out.index("'order-shipping' created")


def test_deploy_of_an_invalid_definition_prints_every_problem_and_exits_2(cli, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "id: broken\nstart: a\nsteps:\n  a: {type: noop, on_success: ghost}\n  b: {type: noop}\n"
    )
    assert main(["deploy", str(bad), *cli]) == 2
    err = capsys.readouterr().err
    assert f"✗ {bad}: 2 problem(s)" in err
    assert (
        f"{bad}: steps.a.on_success: step 'ghost' does not exist; one of: a, b [unknown-step]"
        in err
    )
    assert f"{bad}: steps.b: step 'b' cannot be reached from start 'a' [unreachable]" in err


def test_deploy_of_an_unreadable_file_exits_2_without_a_request(cli, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: [unclosed\n")
    assert main(["deploy", str(bad), *cli]) == 2
    assert "invalid YAML" in capsys.readouterr().err


def test_runs_start_get_list_and_cancel(cli, server, capsys):
    assert main(["deploy", TRIAGE, *cli]) == 0
    capsys.readouterr()
    # When a run is started twice with one idempotency key
    argv = ["runs", "start", "order-triage", "--input", TRIAGE_INPUT, "--idempotency-key", "k1"]
    assert main([*argv, *cli]) == 0
    first = capsys.readouterr().out
    assert main([*argv, *cli]) == 0
    repeat = capsys.readouterr().out
    # Then both name the same run, the second says it already existed
    run_id = first.split()[1].rstrip(":")
    assert len(run_id) == 32 and f"run {run_id}: RUNNING" in first
    assert run_id in repeat and "already started with this Idempotency-Key" in repeat
    # And `runs get` shows its step timeline once it has finished
    run = wait_for_end(capsys, cli, run_id)
    assert run["status"] == "succeeded"
    assert main(["runs", "get", run_id, *cli]) == 0
    out = capsys.readouterr().out
    assert f"run {run_id}: SUCCEEDED" in out
    assert "price_line[2]" in out and "transform" in out
    # And `runs list` lists it, filtered by status
    assert main(["runs", "list", "--workflow", "order-triage", "--status", "succeeded", *cli]) == 0
    assert run_id in capsys.readouterr().out
    page = cli_json(capsys, ["runs", "list", "--workflow", "order-triage", "--limit", "1", *cli])
    assert len(page["items"]) == 1
    # And a run held by the 900 s review delay (in real time now) can be cancelled, once
    server.runtime.time_scale = 1.0
    try:
        held = cli_json(
            capsys,
            ["runs", "start", "order-triage", "--input", TRIAGE_INPUT, "--version", "1", *cli],
        )
        assert main(["runs", "cancel", held["run_id"], *cli]) == 0
        assert f"run {held['run_id']}: ABORTED" in capsys.readouterr().out
        assert main(["runs", "cancel", held["run_id"], *cli]) == 1
        assert "409 conflict" in capsys.readouterr().err
    finally:
        server.runtime.time_scale = 0.001


def test_connection_options_come_from_the_environment(server, monkeypatch, capsys):
    monkeypatch.setenv("RELAYFLOW_API_URL", server.url)
    monkeypatch.setenv("RELAYFLOW_API_KEY", server.bootstrap_key)
    assert main(["runs", "list", "--workflow", "nothing-here"]) == 1
    assert "404 not_found" in capsys.readouterr().err
    monkeypatch.delenv("RELAYFLOW_API_KEY")
    assert main(["runs", "list", "--workflow", "x"]) == 2
    assert "--api-key" in capsys.readouterr().err


def test_a_bad_key_and_an_unreachable_api_exit_1(server, cli, capsys):
    assert main(["runs", "get", "0" * 32, "--api", server.url, "--api-key", "rf_nope"]) == 1
    assert "401 unauthorized" in capsys.readouterr().err
    assert main(["runs", "get", "0" * 32, "--api", "http://127.0.0.1:9", "--api-key", "k"]) == 1
    assert "cannot reach the API" in capsys.readouterr().err


def test_keys_create_and_revoke_through_the_local_admin_routes(server, capsys):
    # One token in 64 starts with "-", which argparse would take for an option: pass it with "=".
    admin = ["--api", server.url, f"--admin-token={server.admin_token}"]
    # When a key is created for a new tenant
    key = cli_json(capsys, ["keys", "create", "--tenant", "initech", "--name", "ci", *admin])
    # Then it works for that tenant only
    headers = {"X-Api-Key": key["secret"]}
    assert key["tenant"] == "initech" and key["secret"].startswith("rf_")
    assert (
        httpx.get(f"{server.url}/workflows", headers=headers, timeout=HTTP_TIMEOUT).json()["items"]
        == []
    )
    # And once revoked it is refused
    assert main(["keys", "revoke", key["key_id"], *admin]) == 0
    assert "revoked at" in capsys.readouterr().out
    assert (
        httpx.get(f"{server.url}/workflows", headers=headers, timeout=HTTP_TIMEOUT).status_code
        == 401
    )
    # And a wrong admin token is refused
    wrong = ["--api", server.url, "--admin-token", "wrong"]
    assert main(["keys", "create", "--tenant", "initech", "--name", "x", *wrong]) == 1
    assert "401 unauthorized" in capsys.readouterr().err


def test_keys_create_refuses_a_reserved_tenant_id_through_either_backend(server, capsys):
    from relayflow.settings import get_settings

    admin = ["--api", server.url, f"--admin-token={server.admin_token}"]
    table = ["--table", get_settings().table_name]
    for backend in (admin, table):
        assert main(["keys", "create", "--tenant", "prod", "--name", "ci", *backend]) == 2
        assert "tenant id 'prod' is reserved" in capsys.readouterr().err


def test_keys_create_and_revoke_directly_in_the_table(server, capsys):
    from relayflow.settings import get_settings

    table = ["--table", get_settings().table_name]
    assert main(["keys", "create", "--tenant", "hooli", "--name", "deploy", *table]) == 0
    out = capsys.readouterr().out
    secret = out.split("secret (shown once): ")[1].strip()
    key_id = out.split()[1]
    assert (
        httpx.get(
            f"{server.url}/workflows", headers={"X-Api-Key": secret}, timeout=HTTP_TIMEOUT
        ).status_code
        == 200
    )
    assert main(["keys", "revoke", key_id, *table]) == 0
    capsys.readouterr()
    assert (
        httpx.get(
            f"{server.url}/workflows", headers={"X-Api-Key": secret}, timeout=HTTP_TIMEOUT
        ).status_code
        == 401
    )


def test_keys_without_a_backend_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.delenv("RELAYFLOW_API_URL", raising=False)
    assert main(["keys", "create", "--tenant", "t1", "--name", "n"]) == 2
    assert "--table" in capsys.readouterr().err


def test_serve_prints_its_url_and_keys_and_answers_until_stopped():
    # Given `relayflow serve` on a free port, in its own process
    process = serve_process([sys.executable, "-m", "relayflow.cli", "serve", "--port", "0"])
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(3)]
        url = lines[0].split(" on ")[1].split()[0]
        key = lines[1].rsplit(": ", 1)[1].strip()
        token = lines[2].rsplit(": ", 1)[1].strip()
        # When it is called with the printed key
        listed = httpx.get(f"{url}/workflows", headers={"X-Api-Key": key}, timeout=10)
        admin = httpx.post(
            f"{url}/admin/keys",
            json={"tenant": "local", "name": "x"},
            headers={"X-Admin-Token": token},
            timeout=10,
        )
        # Then it answers, and stops cleanly on SIGTERM (as on Ctrl-C)
        assert listed.status_code == 200 and listed.json() == {"items": [], "next_token": None}
        assert admin.status_code == 201
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
