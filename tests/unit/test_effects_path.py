"""The way down from a tool step's Lambda handler to its outbound HTTP request visits each
module once (issue #31, "dry run as one seam").

The handler (``functions/tool/app.py``) makes a real ``http.<name>`` tool call, recorded
(moto's table) and answered by an ``httpx.MockTransport``; ``sys.setprofile`` follows it.
Two things are checked, each collapsing consecutive frames of one module:

* the stack of Relayflow frames at the moment httpx is asked to send holds no module twice;
* every call into a module of the step's own layers (the handler, ``steps``, ``tools``)
  from another module, on the whole way down, enters each module once: a module entered
  again was called back into by a module it had called (a layer asking a layer beside or
  above it).

Before the effects port (``relayflow.steps.effects``) the stack was clean, but the way down
entered ``steps.dry_run`` three times (asked by ``steps.idempotency``, then twice by
``steps.tool``; ``steps.guard`` asks it too when the step is flow-controlled)::

    steps.idempotency → steps.dry_run → steps.guard → app → steps.tool → steps.task →
    steps.dry_run → steps.dry_run → tools.catalogue → tools.http

Now the dry run is decided once at ``steps.boundary``::

    steps.boundary → steps.idempotency → steps.guard → app → steps.tool → steps.task →
    steps.effects → tools.catalogue → tools.http

and the stack at the request is ``observability → steps.boundary → steps.idempotency →
steps.guard → app → steps.tool → steps.effects → tools.catalogue → tools.http → net.http``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any

import httpx
import pytest
from relayflow_testing import load_handler, moto_table, step_task

from relayflow.settings import override_settings


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with moto_table(monkeypatch):
        yield


def module_of(frame: FrameType) -> str | None:
    """The frame's Relayflow module (``steps.tool``), ``app`` for a function's handler, or
    ``None`` for any other code."""
    name = str(frame.f_globals.get("__name__") or "")
    if name.startswith("relayflow."):
        return name.removeprefix("relayflow.")
    if name == "fn_tool" or frame.f_code.co_filename.endswith("/functions/tool/app.py"):
        return "app"
    return None


def relayflow_stack(frame: FrameType | None) -> list[str]:
    """The Relayflow modules on the stack, outermost first, consecutive repeats collapsed."""
    modules: list[str] = []
    while frame is not None:
        module = module_of(frame)
        if module is not None:
            modules.append(module)
        frame = frame.f_back
    modules.reverse()
    return [m for i, m in enumerate(modules) if i == 0 or modules[i - 1] != m]


def climbs(path: list[str]) -> list[str]:
    """The modules entered again after the path left them."""
    seen: set[str] = set()
    again: list[str] = []
    for module in path:
        if module in seen:
            again.append(module)
        seen.add(module)
    return again


def tool_event(url: str) -> dict[str, Any]:
    config = {
        "tool": "http.billing",
        "args": {"method": "POST", "path": "/charge", "body": {"amount": 3}},
        "http_tool": {"base_url": url, "timeout_seconds": 5},
    }
    return step_task("charge", "tool", config)


#: The layers a step function's own code lives in; the modules below them (documents,
#: payloads, settings, expressions, the HTTP client) are leaves any of them may use.
STEP_LAYERS = ("app", "steps.", "tools.")


class Journey:
    """A profile function: every call into a module of :data:`STEP_LAYERS` from another
    module (code run by an import is not a call: a warm Lambda has imported it all), until
    httpx is asked to send; then the Relayflow stack at that moment."""

    def __init__(self) -> None:
        self.entries: list[str] = []
        self.stack_at_send: list[str] | None = None
        self.importing = 0

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if self.stack_at_send is not None or event not in ("call", "return"):
            return
        code = frame.f_code
        if code.co_name == "<module>":
            self.importing += 1 if event == "call" else -1
            return
        if self.importing or event != "call":
            return
        if code.co_name == "send" and frame.f_globals.get("__name__") == "httpx._client":
            self.stack_at_send = relayflow_stack(frame)
            return
        module, caller = module_of(frame), _caller_module(frame)
        if module is not None and module != caller and module.startswith(STEP_LAYERS):
            self.entries.append(module)


def _caller_module(frame: FrameType) -> str | None:
    back = frame.f_back
    while back is not None and module_of(back) is None:
        back = back.f_back
    return module_of(back) if back is not None else None


def test_a_tool_step_reaches_its_http_request_visiting_each_module_once(monkeypatch, table):
    # Given the tool function's handler and an HTTP API that answers every request
    from relayflow.net import http as net_http

    handler = load_handler("tool").handler
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"charged": True})

    monkeypatch.setattr(net_http, "_client", httpx.Client(transport=httpx.MockTransport(answer)))
    journey = Journey()
    # When the step runs for real, its request served by the mock transport
    with override_settings(ssrf_allow=["127.0.0.1"]):
        sys.setprofile(journey)
        try:
            output = handler(tool_event("http://127.0.0.1:8999/v1"), None)["output"]
        finally:
            sys.setprofile(None)
    # Then the request went out once and its answer is the step's output
    assert len(sent) == 1 and output["body"] == {"charged": True}
    path = journey.stack_at_send
    assert path is not None
    print("\nstack at the request:", " → ".join(path))
    print("step-layer modules entered:", " → ".join(journey.entries))
    # And the stack at that moment holds each module once
    assert climbs(path) == [], " → ".join(path)
    # And on the whole way down each module of the step's layers was entered once: none
    # is called back into by a module it called (or by one beside it)
    assert climbs(journey.entries) == [], " → ".join(journey.entries)
