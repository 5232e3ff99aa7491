"""``relayflow serve`` as a process: ``--resources`` creates what the file declares before the
banner, the banner and ``GET /`` say everything is in memory, the console link signs in, and a
bad resources file is a usage error (exit 2)."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import httpx
import pytest
from http_api import read_banner, relayflow_command, serve_process

pytestmark = pytest.mark.integration

RESOURCES = Path("workflows/examples/local/order_fulfilment.resources.yaml")


def test_serve_creates_resources_and_says_it_keeps_everything_in_memory():
    argv = relayflow_command("serve", "--port", "0", "--resources", str(RESOURCES))
    process = serve_process(argv)
    try:
        text = read_banner(process, "Everything")
        url = re.search(r"control API on (http://\S+)", text).group(1)
        key = re.search(r"Console: \S+/console/login#key=(\S+)", text).group(1)
        assert re.search(rf"created [1-9]\d* resource\(s\) from {RESOURCES}", text)
        assert "lives in memory" in text
        index = httpx.get(f"{url}/", timeout=30).json()
        assert index["console"] == "/console" and index["state"].startswith("in memory")
        signed_in = httpx.post(f"{url}/console/login", data={"key": key}, timeout=30)
        assert signed_in.status_code == 303
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def test_a_bad_resources_file_is_a_usage_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("dynamodb_tables: [{name: 3}]\nnope: 1\n")
    done = subprocess.run(
        relayflow_command("serve", "--port", "0", "--resources", str(bad)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert f"--resources {bad}:" in done.stderr
