"""The console's pure parts: the run form from an input_schema (fields, parsing, errors) and the
graph (routes, error routes, compensations, parks, a run's statuses); and the request handling
that needs no server (sign-in redirect, cross-site refusal, the vendored htmx)."""

from __future__ import annotations

import re
from urllib.parse import quote

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


class _RecordingApi:
    """A control API that accepts every key and records each call's method and path."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, str]]] = []

    def __call__(self, method, path, headers, body):
        self.calls.append((method, path, dict(headers)))
        return 200, b'{"items": [], "next": null}'


def _signed_in(console: Console, key: str = "rf_key_alpha") -> str:
    answer = console.handle("POST", "/console/login", [("Host", "h:1")], f"key={key}".encode())
    assert answer.status == 303
    cookie = dict(answer.headers)["Set-Cookie"]
    return cookie.split(";", 1)[0]


def test_the_cookie_holds_a_session_id_never_the_key():
    api = _RecordingApi()
    console = Console(api)
    cookie = _signed_in(console, "rf_key_alpha")
    name, _, value = cookie.partition("=")
    assert name == "rf_console_session" and "rf_key_alpha" not in value and len(value) >= 40
    # The session's key is what the console calls the API with
    console.handle("GET", "/console/breakers", [("Cookie", cookie)], b"")
    assert any("rf_key_alpha" in str(headers) for _, _, headers in api.calls[1:])
    # A made-up session, or the key itself as the cookie, is not signed in
    for forged in ("rf_console_session=guess", "rf_console_session=rf_key_alpha"):
        answer = console.handle("GET", "/console/runs", [("Cookie", forged)], b"")
        assert dict(answer.headers)["Location"] == "/console/login"
    # Signing out ends the session on the server
    console.handle("POST", "/console/logout", [("Cookie", cookie)], b"")
    answer = console.handle("GET", "/console/runs", [("Cookie", cookie)], b"")
    assert dict(answer.headers)["Location"] == "/console/login"


def test_the_sign_in_link_never_submits_itself():
    page = Console(_RecordingApi()).handle("GET", "/console/login", [], b"")
    html = page.body.decode()
    assert '<script src="/console/static/login.js"></script>' in html
    assert ".submit(" not in html
    script = Console(_RecordingApi()).handle("GET", "/console/static/login.js", [], b"")
    assert script.status == 200 and b".submit(" not in script.body


def test_a_breaker_id_with_a_colon_is_reset_under_its_own_name():
    # Given a breaker id as the breakers page links it (':' percent-encoded)
    api = _RecordingApi()
    console = Console(api)
    cookie = _signed_in(console)
    console.handle(
        "POST",
        "/console/breakers/http%3Aapi.example.com/reset",
        [("Host", "h:1"), ("Origin", "http://h:1"), ("Cookie", cookie)],
        b"",
    )
    # Then the API is asked once, with the id encoded once (not %253A)
    assert [p for m, p, _ in api.calls if m == "POST" and "/breakers/" in p] == [
        "/breakers/http%3Aapi.example.com/reset"
    ]


def test_every_answer_forbids_sniffing_referrers_and_foreign_scripts():
    console = Console(_RecordingApi())
    for answer in (
        console.handle("GET", "/console/login", [], b""),
        console.handle("GET", "/console/runs", [], b""),
        console.handle("GET", "/console/static/login.js", [], b""),
    ):
        headers = dict(answer.headers)
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "no-referrer"
    csp = dict(console.handle("GET", "/console/login", [], b"").headers)["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp


def test_a_redirect_target_with_a_line_break_or_another_host_is_never_sent():
    api = _RecordingApi()
    console = Console(api)
    cookie = _signed_in(console)
    for back in ("/console/runs\r\nSet-Cookie: x=1", "//evil.example/x", "https://evil.example"):
        answer = console.handle(
            "POST",
            "/console/approvals/ap1/respond",
            [("Host", "h:1"), ("Origin", "http://h:1"), ("Cookie", cookie)],
            f"option=approve&back={quote(back)}".encode(),
        )
        location = dict(answer.headers)["Location"]
        assert location.startswith("/console/approvals") and "\n" not in location


def test_a_post_from_the_same_host_over_another_scheme_is_refused():
    console = Console(_RecordingApi())
    cookie = _signed_in(console)
    headers = [("Host", "h:1"), ("Cookie", cookie)]
    other_scheme = console.handle(
        "POST", "/console/runs/r1/cancel", [*headers, ("Origin", "https://h:1")], b""
    )
    assert other_scheme.status == 403
    same = console.handle(
        "POST", "/console/runs/r1/cancel", [*headers, ("Origin", "http://h:1")], b""
    )
    assert same.status == 303
    # Origin null (what no-referrer makes a browser send) passes only from the console's page
    null = [*headers, ("Origin", "null")]
    assert console.handle("POST", "/console/runs/r1/cancel", null, b"").status == 403
    own_page = [*null, ("Sec-Fetch-Site", "same-origin")]
    assert console.handle("POST", "/console/runs/r1/cancel", own_page, b"").status == 303
    cross = [*null, ("Sec-Fetch-Site", "cross-site")]
    assert console.handle("POST", "/console/runs/r1/cancel", cross, b"").status == 403


def test_an_open_wait_is_drawn_as_waiting_not_running():
    run = {
        "steps": [
            {"key": "charge", "type": "tool", "status": "running"},
            {"key": "ask", "type": "approval", "status": "running"},
            {"key": "hook", "type": "waitpoint", "status": "succeeded"},
        ]
    }
    states = timeline_states(run)
    assert states["charge"].status == "running"
    assert states["ask"].status == "waiting"
    assert states["hook"].status == "succeeded"


def _contrast(hex_a: str, hex_b: str = "ffffff") -> float:
    def luminance(hex_colour: str) -> float:
        channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (0, 2, 4)]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    high, low = sorted((luminance(hex_a), luminance(hex_b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_every_badge_colour_is_readable_under_white_text():
    from relayflow.console.html import STYLE

    colours = dict(re.findall(r"--(ok|bad|run|wait|idle):#([0-9a-f]{6})", STYLE))
    colours["aborted"] = re.search(r"\.b-aborted\{background:#([0-9a-f]{6})", STYLE).group(1)
    assert len(colours) == 6
    # WCAG AA for small text: 4.5:1
    assert {name: round(_contrast(c), 2) for name, c in colours.items() if _contrast(c) < 4.5} == {}


def test_every_select_and_textarea_of_the_run_page_has_a_name():
    from relayflow.console.pages import rerun_form, resume_form

    html = resume_form("/console/runs/r1", {"parked": {"step": "a"}}) + rerun_form(
        "/console/runs/r1", {"version": 1}, {"start": "a", "steps": {"a": {"type": "noop"}}}
    )
    controls = re.findall(r"<(select|textarea)\b([^>]*)>", html)
    assert len(controls) == 5
    assert all("aria-label=" in attributes for _, attributes in controls)
