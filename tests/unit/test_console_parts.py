"""The console's pure parts: the run form from an input_schema (fields, parsing, errors) and the
graph (routes, error routes, compensations, parks, a run's statuses); and the request handling
that needs no server (sign-in redirect, cross-site refusal, the vendored htmx)."""

from __future__ import annotations

import re

from relayflow.console import Console
from relayflow.console.forms import parse_input, render_fields
from relayflow.console.graph import render_svg, timeline_states

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "vip": {"type": "boolean"},
        "tier": {"enum": ["gold", "silver", 3]},
        "meta": {"type": "object"},
    },
    "required": ["name"],
}


def test_the_form_has_one_field_per_property_of_the_right_kind():
    html = render_fields(SCHEMA)
    assert 'type="text" id="f-name" name="in.name"' in html
    assert 'type="number" step="1" id="f-count"' in html
    assert 'type="number" step="any" id="f-ratio"' in html
    assert 'type="checkbox" id="f-vip"' in html
    assert '<option value="3">3</option>' in html
    assert '<textarea id="f-meta"' in html


def test_a_submitted_form_becomes_typed_input_and_bad_fields_are_named():
    form = {"in.name": "Ada", "in.count": "3", "in.ratio": "0.5", "in.vip": "on", "in.tier": "3"}
    assert parse_input(SCHEMA, {**form, "in.meta": '{"a": 1}'}) == (
        {"name": "Ada", "count": 3, "ratio": 0.5, "vip": True, "tier": 3, "meta": {"a": 1}},
        {},
    )
    value, errors = parse_input(SCHEMA, {"in.count": "three", "in.meta": "{"})
    assert value == {"vip": False}
    assert set(errors) == {"/count", "/meta"}


def test_without_a_schema_the_input_is_one_json_box():
    assert 'name="input_json"' in render_fields(None)
    assert parse_input(None, {"input_json": '{"x": [1]}'}) == ({"x": [1]}, {})
    assert parse_input(None, {"input_json": "nope"})[1][""].startswith("not JSON")


DEFINITION = {
    "id": "saga",
    "start": "charge",
    "steps": {
        "charge": {
            "type": "webhook_out",
            "url": "https://pay.example.com",
            "compensate": "refund",
            "on_error": {"action": "park"},
            "on_success": "ship",
            "on_failure": "alert",
        },
        "ship": {"type": "custom", "url": "https://x.example.com", "compensate": {"type": "noop"}},
        "alert": {"type": "noop"},
        "refund": {"type": "webhook_out", "url": "https://pay.example.com/refund"},
    },
}


def test_the_graph_draws_routes_error_routes_compensations_and_parks():
    svg = render_svg(DEFINITION)
    edges = set(re.findall(r'class="edge e-(\w+)"[^>]*data-from="([^"]+)" data-to="([^"]+)"', svg))
    assert ("route", "charge", "ship") in edges
    assert ("failure", "charge", "alert") in edges
    assert ("compensate", "charge", "refund") in edges
    assert ("compensate", "ship", "ship.compensate") in edges
    assert re.search(r'data-step="charge"[^>]*>.*?webhook_out · park', svg)


def test_a_run_colours_each_step_and_folds_for_each_items():
    run = {
        "steps": [
            {"key": "charge", "status": "succeeded", "attempts": 2, "duration_ms": 1500},
            {"key": "ship[0]", "status": "succeeded", "attempts": 1},
            {"key": "ship[1]", "status": "failed", "attempts": 1},
        ]
    }
    states = timeline_states(run)
    assert (states["ship"].status, states["ship"].items) == ("failed", 2)
    svg = render_svg(DEFINITION, states)
    assert 'class="node s-succeeded" data-step="charge"' in svg
    assert "×2" in svg and "1.5 s" in svg
    assert 'data-step="alert" data-status="pending"' in svg


def test_requests_without_a_key_go_to_sign_in_and_cross_site_posts_are_refused():
    def transport(method, path, headers, body):  # never reached in this test
        raise AssertionError(path)

    console = Console(transport)
    answer = console.handle("GET", "/console/runs", [], b"")
    assert (answer.status, dict(answer.headers)["Location"]) == (303, "/console/login")
    refused = console.handle(
        "POST",
        "/console/runs/abc/cancel",
        [("Host", "127.0.0.1:8080"), ("Origin", "https://evil.example"), ("Cookie", "x=1")],
        b"",
    )
    assert refused.status == 403
    htmx = console.handle("GET", "/console/static/htmx-2.0.11.min.js", [], b"")
    assert htmx.status == 200 and b"htmx" in htmx.body[:2000]
    assert console.handle("GET", "/console/static/../app.py", [], b"").status == 404
