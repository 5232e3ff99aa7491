"""THE hostile-JSON property (issue 16): Hypothesis generates JSON no well-behaved client sends
(non-finite numbers, huge integers, deep nesting, lone surrogates, NUL, long keys) and sends
it to every write route of `relayflow serve` over HTTP; then every object the write could have
touched, and every list, is read back. Not one answer may be a 5xx.

Deterministic (``derandomize``, no example database) and bounded in examples, so it runs in
well under a minute.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from relayflow_testing import HTTP_TIMEOUT, eventually
from workflow_shapes import long_waitpoint, webhook_echo

from relayflow.local.serve import LocalServer

pytestmark = pytest.mark.integration

EXAMPLES = 10
FORM = {"type": "object", "properties": {"payload": {"title": "Payload"}}}
APPROVAL = {
    "id": "hostile-approval",
    "start": "ask",
    "steps": {
        "ask": {
            "type": "approval",
            "title": "Go?",
            "options": ["approve", "reject"],
            "form_schema": FORM,
        }
    },
}
WAITPOINT = long_waitpoint("hostile-waitpoint")
ECHO = webhook_echo("hostile-echo", "hostile-open")

# ----------------------------------------------------------------------------- hostile JSON


class Raw(str):
    """Text that goes into the JSON as it is (NaN, 1e999, a 5,000-digit integer)."""


RAW_NUMBERS = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e999",
    "-1e999",
    "1e-999",
    "4.9e-324",
    "1e300",
    "-0.0",
    "9" * 39,
    "9" * 5000,
]
HOSTILE_TEXT = ["\ud800", "a\udfffb", "\x00", "nul\x00inside", "\u2028", "", "\ufeff"]

leaves = st.one_of(
    st.sampled_from([Raw(text) for text in RAW_NUMBERS]),
    st.integers(min_value=-(10**45), max_value=10**45),
    st.floats(),
    st.sampled_from(HOSTILE_TEXT),
    st.text(max_size=12),
    st.integers(min_value=1_000, max_value=3_000).map(lambda n: "s" * n),
    st.booleans(),
    st.none(),
)
keys = st.one_of(
    st.text(max_size=8),
    st.sampled_from(HOSTILE_TEXT),
    st.integers(min_value=1_000, max_value=2_000).map(lambda n: "k" * n),
)
values = st.recursive(
    leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)),
    max_leaves=8,
)


def _nest(value: Any, depth: int) -> Any:
    for level in range(depth):
        value = [value] if level % 2 else {"n": value}
    return value


# A value, inside 0 to 300 extra levels (the limit is 24 levels: both sides of it, and far).
hostile = st.builds(_nest, values, st.sampled_from([0, 0, 0, 1, 21, 22, 23, 24, 25, 40, 300]))


def encode(value: Any) -> str:
    """JSON text of ``value``, with Raw tokens verbatim and surrogates as \\u escapes."""
    parts: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Raw):
            parts.append(str(item))
        elif isinstance(item, tuple):  # ("text", literal) pushed by a container below
            parts.append(item[1])
        elif isinstance(item, dict):
            pieces: list[Any] = [("text", "{")]
            for index, (key, inner) in enumerate(item.items()):
                pieces += [("text", ("," if index else "") + json.dumps(key) + ":"), inner]
            stack.extend(reversed([*pieces, ("text", "}")]))
        elif isinstance(item, list):
            pieces = [("text", "[")]
            for index, inner in enumerate(item):
                pieces += [("text", "," if index else ""), inner]
            stack.extend(reversed([*pieces, ("text", "]")]))
        else:
            parts.append(json.dumps(item))  # floats: NaN/Infinity as JS literals
    return "".join(parts)


# ----------------------------------------------------------------------------- the server


@dataclass
class World:
    """The server, a client of its tenant, and the objects the routes write to."""

    server: LocalServer
    client: httpx.Client
    runs: list[str] = field(default_factory=list)
    approval: dict[str, Any] | None = None
    waitpoint: tuple[str, str] | None = None

    def checked(self, response: httpx.Response) -> httpx.Response:
        assert response.status_code < 500, (response.request.url, response.text[:500])
        assert "Traceback" not in response.text
        return response

    def fresh_approval(self) -> dict[str, Any]:
        if (
            self.approval is None
            or self.read(f"/approvals/{self.approval['approval_id']}")["status"] != "pending"
        ):
            run_id = self.start(APPROVAL["id"])
            self.approval = eventually(
                lambda: next(
                    (
                        a
                        for a in self.read("/approvals", limit=100)["items"]
                        if a["run_id"] == run_id
                    ),
                    None,
                )
            )
        return self.approval

    def fresh_waitpoint(self) -> tuple[str, str]:
        """A pending waitpoint and its run (a new run when the last one was answered)."""
        if self.waitpoint is None or self.read(f"/waitpoints/{self.waitpoint[0]}")["status"] != (
            "pending"
        ):
            run_id = self.start(WAITPOINT["id"])
            found = eventually(lambda: self.read("/waitpoints", run_id=run_id)["items"])
            self.waitpoint = (found[0]["waitpoint_id"], run_id)
        return self.waitpoint

    def start(self, workflow_id: str) -> str:
        started = self.client.post(f"/workflows/{workflow_id}/runs", json={"input": {}})
        assert started.status_code == 201, started.text
        self.runs.append(started.json()["run_id"])
        return started.json()["run_id"]

    def read(self, path: str, **params: Any) -> Any:
        # httpx replaces a path's own query with ``params`` when both are given
        response = self.checked(self.client.get(path, params=params or None))
        assert response.status_code == 200, response.text
        return response.json()

    def read_everything(self, run_id: str | None = None) -> None:
        """Every list, and the objects a write route may have touched (the newest of each
        list, and the run it started), read back."""
        for status in ("pending", "decided", "expired"):
            for approval in self.read("/approvals", status=status, limit=100)["items"][-3:]:
                self.read(f"/approvals/{approval['approval_id']}")
        runs = {run_id, *self.runs[-2:]} - {None}
        for workflow in self.read("/workflows", limit=100)["items"]:
            self.read(f"/workflows/{workflow['workflow_id']}")
            listed = self.read(f"/workflows/{workflow['workflow_id']}/runs", limit=100)["items"]
            runs.update(run["run_id"] for run in listed[:2])
        for run in runs:
            self.read(f"/runs/{run}")
            for waitpoint in self.read("/waitpoints", run_id=run)["items"]:
                self.read(f"/waitpoints/{waitpoint['waitpoint_id']}")
        for entry in self.read("/dlq", limit=100)["items"][:3]:
            self.read(f"/dlq/{entry['run_id']}")
        self.read("/breakers")


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with (
        LocalServer(time_scale=0.001) as server,
        httpx.Client(
            base_url=server.url, headers={"X-Api-Key": server.bootstrap_key}, timeout=60
        ) as client,
    ):
        for definition in (APPROVAL, WAITPOINT, ECHO):
            put = client.put(f"/workflows/{definition['id']}", json=definition)
            assert put.status_code in (200, 201), put.text
        yield World(server, client)


# ----------------------------------------------------------------------------- the routes
# Each route sends the hostile text in its body and returns the answer and what to read back:
# the objects the write could have touched, and the lists they appear in.

JSON = {"Content-Type": "application/json"}
Sent = tuple[httpx.Response, list[str]]
RUNS = f"/workflows/{ECHO['id']}/runs"


def _started(response: httpx.Response) -> list[str]:
    body = response.json() if response.status_code in (200, 201, 202) else {}
    return [f"/runs/{body['run_id']}"] if isinstance(body, dict) and "run_id" in body else []


def start_run(world: World, text: str) -> Sent:
    response = world.client.post(RUNS, content=f'{{"input": {text}}}', headers=JSON)
    return response, [*_started(response), RUNS]


def put_workflow(world: World, text: str) -> Sent:
    mapping = {"got": "HOSTILE"}
    definition = {**ECHO, "steps": {"echo": {"type": "transform", "mapping": mapping}}}
    body = json.dumps(definition).replace('"HOSTILE"', text)
    response = world.client.put(f"/workflows/{ECHO['id']}", content=body, headers=JSON)
    return response, [f"/workflows/{ECHO['id']}", "/workflows"]


def rollback(world: World, text: str) -> Sent:
    response = world.client.post(
        f"/workflows/{ECHO['id']}/rollback", content=f'{{"version": {text}}}', headers=JSON
    )
    return response, [f"/workflows/{ECHO['id']}", "/workflows"]


def publish_event(world: World, text: str) -> Sent:
    body = f'{{"source": "shop.orders", "detail_type": "order.created", "detail": {text}}}'
    return world.client.post("/events", content=body, headers=JSON), ["/workflows"]


def _approval_reads(approval: dict[str, Any]) -> list[str]:
    return [
        f"/approvals/{approval['approval_id']}",
        "/approvals?status=pending",
        "/approvals?status=decided",
        f"/runs/{approval['run_id']}",
    ]


def respond(world: World, text: str) -> Sent:
    approval = world.fresh_approval()
    body = f'{{"option": "approve", "data": {text}}}'
    path = f"/approvals/{approval['approval_id']}/respond"
    return world.client.post(path, content=body, headers=JSON), _approval_reads(approval)


def _waitpoint_reads(waitpoint_id: str, run_id: str) -> list[str]:
    return [f"/waitpoints/{waitpoint_id}", f"/waitpoints?run_id={run_id}", f"/runs/{run_id}"]


def complete(world: World, text: str) -> Sent:
    waitpoint_id, run_id = world.fresh_waitpoint()
    response = world.client.post(
        f"/waitpoints/{waitpoint_id}/complete", content=f'{{"data": {text}}}', headers=JSON
    )
    return response, _waitpoint_reads(waitpoint_id, run_id)


def fail(world: World, text: str) -> Sent:
    waitpoint_id, run_id = world.fresh_waitpoint()
    response = world.client.post(
        f"/waitpoints/{waitpoint_id}/fail", content=f'{{"message": {text}}}', headers=JSON
    )
    return response, _waitpoint_reads(waitpoint_id, run_id)


def webhook(world: World, text: str) -> Sent:
    response = httpx.post(
        f"{world.server.url}/hooks/{ECHO['triggers'][0]['slug']}",
        content=text,
        timeout=HTTP_TIMEOUT,
    )
    return response, [*_started(response), RUNS]


def guest_form(world: World, text: str) -> Sent:
    from relayflow.approvals.links import approval_guest_links
    from relayflow.dal.waits import WaitDal

    approval = world.fresh_approval()
    stored = WaitDal().get_approval("local", approval["approval_id"])
    link = approval_guest_links(stored)["approve"]
    response = httpx.post(link, data={"f.payload": text}, timeout=60)
    return response, _approval_reads(approval)


def admin_key(world: World, text: str) -> Sent:
    response = httpx.post(
        f"{world.server.url}/admin/keys",
        content=f'{{"tenant": {text}, "name": {text}}}',
        headers={"X-Admin-Token": world.server.admin_token, **JSON},
        timeout=HTTP_TIMEOUT,
    )
    return response, []


WRITE_ROUTES = [
    start_run,
    put_workflow,
    rollback,
    publish_event,
    respond,
    complete,
    fail,
    webhook,
    guest_form,
    admin_key,
]


@pytest.mark.parametrize("route", WRITE_ROUTES, ids=lambda route: route.__name__)
@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(value=hostile)
def test_hostile_json_never_gets_a_5xx_from_a_write_or_a_later_read(world, route, value):
    # Given hostile JSON in the route's body
    text = encode(value)
    # When it is sent / Then the answer is not a 5xx
    response, reads = route(world, text)
    world.checked(response)
    # And what it could have touched reads back, alone and in its lists
    for path in reads:
        world.read(path)


def test_after_every_hostile_write_everything_still_reads_back(world):
    # Runs after the property (file order): every list and the newest of each, once more
    world.read_everything()
    if world.server.admin_token:
        keys = httpx.get(
            f"{world.server.url}/admin/keys?tenant=local",
            headers={"X-Admin-Token": world.server.admin_token},
            timeout=HTTP_TIMEOUT,
        )
        assert keys.status_code == 200, keys.text
