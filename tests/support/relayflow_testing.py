"""Helpers the test tiers share: load a function's handler and sample events the way
`sam local invoke` would, and a recording HTTP server on 127.0.0.1.

On pytest's ``pythonpath`` (pyproject.toml), so any test imports it by name.
"""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs, urlsplit

ROOT = Path(__file__).resolve().parents[2]
#: Seconds a test's HTTP request to a local server may take (httpx's own default is 5 s). A
#: request that compiles a workflow or starts a run takes more than 5 s on a loaded 2-core CI
#: machine; the bound only ends a test that is failing anyway.
HTTP_TIMEOUT = 30.0
#: The golden compiled machines (``tests/golden/*.asl.json``) and the example workflows
#: (``workflows/examples/*.yaml``), sorted by path.
GOLDEN_MACHINES = sorted((ROOT / "tests" / "golden").glob("*.asl.json"))
EXAMPLE_WORKFLOWS = sorted((ROOT / "workflows" / "examples").glob("*.yaml"))


def load_handler(function: str) -> ModuleType:
    """``functions/<function>/app.py`` loaded by path, as the Lambda runtime loads it."""
    spec = importlib.util.spec_from_file_location(
        f"fn_{function}", ROOT / "functions" / function / "app.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lambda_context(function: str) -> Any:
    """The Lambda context ``sam local invoke`` gives ``functions/<function>`` in the ``dev``
    stage (30 s left)."""
    from types import SimpleNamespace

    name = f"relayflow-dev-{function}"
    return SimpleNamespace(
        function_name=name,
        function_version="$LATEST",
        memory_limit_in_mb=512,
        log_group_name=f"/aws/lambda/{name}",
        log_stream_name="sam-local",
        aws_request_id="sam-local-invoke",
        invoked_function_arn=f"arn:aws:lambda:us-east-1:123456789012:function:{name}",
        get_remaining_time_in_millis=lambda: 30_000,
    )


def load_event(function: str, case: str) -> dict[str, Any]:
    """``events/<function>/<case>.json``: the file `sam local invoke -e` would send."""
    return json.loads((ROOT / "events" / function / f"{case}.json").read_text())


def step_config(event: dict[str, Any]) -> dict[str, Any]:
    """The config of a step Task payload, decoded (it travels as a JSON string)."""
    return json.loads(event["step"]["config"])


def set_step_config(event: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """``event`` with its step config replaced, encoded as the compiler encodes it."""
    from relayflow.document import encode_config

    event["step"]["config"] = encode_config(config)
    return event


def step_task(
    key: str,
    step_type: str,
    config: dict[str, Any],
    *,
    workflow_id: str = "wf",
    tenant: str = "acme",
    trigger: Any = None,
) -> dict[str, Any]:
    """A step Task payload for a first attempt: the step ``key`` of ``step_type`` with
    ``config``, in run ``run-1`` of ``workflow_id`` for ``tenant``, its trigger ``trigger``
    (``{}`` when none) and no step output yet."""
    from relayflow.document import StepRef

    return {
        "step": StepRef(key=key, type=step_type, config=config).wire(),
        "doc": {
            "run": {"id": "run-1", "workflow_id": workflow_id, "tenant": tenant},
            "trigger": {} if trigger is None else trigger,
            "steps": {},
        },
        "context": {"attempt": 0},
    }


@dataclass
class Received:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names
    body: bytes


Reply = tuple[int, dict[str, str], bytes]


class Server:
    """Records every request; answers with ``reply(request)`` (200 + JSON echo by default).

    Runs on 127.0.0.1 (port 0) in a daemon thread; the SSRF guard must allow 127.0.0.1
    (``override_settings(ssrf_allow=["127.0.0.1"])``) for the product code to reach it.
    """

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.reply: Callable[[Received], Reply] = self.echo
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def handle_any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                parts = urlsplit(self.path)
                received = Received(
                    self.command,
                    parts.path,
                    parse_qs(parts.query),
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length),
                )
                server.requests.append(received)
                status, headers, body = server.reply(received)
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @staticmethod
    def echo(received: Received) -> Reply:
        body = json.dumps({"method": received.method, "path": received.path}).encode()
        return 200, {"Content-Type": "application/json", "ETag": '"v1"'}, body

    def answering(self, reply: Callable[[Received], Reply]) -> Server:
        """This server, its record cleared, answering with ``reply`` from now on."""
        self.requests.clear()
        self.reply = reply
        return self

    def to(self, path: str) -> list[Received]:
        return [r for r in self.requests if r.path == path]

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@contextmanager
def allowed_server() -> Iterator[Server]:
    """A recording server the SSRF guard lets product code reach (127.0.0.1 allowed)."""
    from relayflow.settings import override_settings

    with override_settings(ssrf_allow=["127.0.0.1"]):
        server = Server()
        try:
            yield server
        finally:
            server.stop()


def fresh_allowed_server() -> Iterator[Server]:
    """A fixture function: a fresh :func:`allowed_server` per test, for a module to declare as
    ``server = pytest.fixture(fresh_allowed_server, name="server")``."""
    with allowed_server() as server:
        yield server


@contextmanager
def platform_runtime(time_scale: float = 0.001) -> Iterator[Any]:
    """A :class:`LocalRuntime` with what the control plane needs in it: the Relayflow table
    and the Relayflow event bus (the settings' names)."""
    from relayflow.adapters.aws import client
    from relayflow.dal.schema import create_table
    from relayflow.local.runtime import LocalRuntime
    from relayflow.settings import get_settings

    with LocalRuntime(time_scale=time_scale) as rt:
        create_table(client("dynamodb"))
        rt.events_client.create_event_bus(Name=get_settings().event_bus_name)
        yield rt


def bootstrap_client(server: Any) -> Any:
    """An ``httpx.Client`` for a ``relayflow serve`` test server with its bootstrap key
    (tenant ``local``). Close it (or use it as a context manager)."""
    import httpx

    return httpx.Client(
        base_url=server.url,
        headers={"Authorization": f"Bearer {server.bootstrap_key}"},
        timeout=HTTP_TIMEOUT,
    )


def tenant_client(server: Any, tenant: str, **client_options: Any) -> Any:
    """An ``httpx.Client`` for ``tenant`` on a ``relayflow serve`` test server, with a key
    created through its admin route (requests time out after :data:`HTTP_TIMEOUT` unless
    ``client_options`` say otherwise). Close it (or use it as a context manager)."""
    import httpx

    created = httpx.post(
        f"{server.url}/admin/keys",
        json={"tenant": tenant, "name": "tests"},
        headers={"X-Admin-Token": server.admin_token},
        timeout=HTTP_TIMEOUT,
    )
    assert created.status_code == 201, created.text
    return httpx.Client(
        base_url=server.url,
        headers={"X-Api-Key": created.json()["secret"]},
        **{"timeout": HTTP_TIMEOUT, **client_options},
    )


@contextmanager
def moto_table(monkeypatch: Any) -> Iterator[None]:
    """moto in process with fake credentials (no profile or endpoint of the machine leaks
    in), and the Relayflow table created; AWS clients are fresh on the way in and out."""
    from moto import mock_aws

    from relayflow.adapters.aws import client, reset_clients
    from relayflow.dal import create_table

    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    reset_clients()
    try:
        with mock_aws():
            create_table(client("dynamodb"))
            yield
    finally:
        reset_clients()


def recorded_outputs(record: Any) -> dict[str, Any]:
    """Each step's output from an execution's states (a local ``ExecutionRecord``): the record
    its states wrote at ``steps.<key>`` (the last pass's, in a loop). The final state
    document keeps only the outputs still live at the end, so tests read outputs here."""
    outputs: dict[str, Any] = {}
    for state in record.states:
        if not isinstance(state.output, dict) or state.iteration is not None:
            continue
        key = state.name.split(".", 1)[0]
        step = (state.output.get("steps") or {}).get(key)
        if isinstance(step, dict) and "output" in step:
            outputs[key] = step["output"]
    return outputs


class FixedClock:
    """A clock a test sets by hand (``clock.now = …``), for code that takes ``clock()``."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def eventually(check: Callable[[], Any], timeout: float = 60.0, interval: float = 0.05) -> Any:
    """Poll ``check`` until it returns something true, and return that. The timeout only ends
    a test that hangs; nothing about the time taken is asserted."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError("the condition did not hold in time")
        time.sleep(interval)


def record_scaled_sleeps(monkeypatch: Any) -> list[tuple[float, float]]:
    """Every Wait or Retry sleep the local runtime scales from now on, as (ASL seconds, real
    seconds), in order. A test asserts what the runtime was asked to sleep, which holds however
    loaded the machine is, rather than how long the run took (docs/development.md)."""
    from relayflow.local import timescale

    sleeps: list[tuple[float, float]] = []
    scale = timescale.scaled

    def recording(seconds: float) -> float:
        real = scale(seconds)
        sleeps.append((seconds, real))
        return real

    monkeypatch.setattr(timescale, "scaled", recording)
    return sleeps
