"""The guarded HTTP client against real HTTP servers on 127.0.0.1.

127.0.0.1 is a loopback address, so every test lets it through the SSRF guard with the
``ssrf_allow`` setting, exactly as local development does. Host names are answered by injected
resolvers; nothing here uses DNS or leaves the machine.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relayflow.errors import (
    HttpError,
    InvalidArgsError,
    RelayflowError,
    SsrfBlocked,
    TransientError,
)
from relayflow.net import http
from relayflow.settings import override_settings


class CountingServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.connections = 0
        self.requests: list[dict[str, Any]] = []
        #: ``/slow`` answers once this is set (the fixture sets it when the test ends).
        self.slow_answers = threading.Event()

    def get_request(self) -> tuple[socket.socket, Any]:
        accepted = super().get_request()
        self.connections += 1
        return accepted

    @property
    def port(self) -> int:
        return self.server_address[1]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so connection reuse is observable
    server: CountingServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._route()

    do_POST = do_PUT = do_DELETE = do_HEAD = do_GET

    def _route(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        seen = {
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body.decode("utf-8", "replace"),
        }
        self.server.requests.append(seen)
        path = self.path.split("?", 1)[0]
        routes = {
            "/json": (200, "application/json; charset=utf-8", b'{"ok": true, "n": 1}', {}),
            "/bad-json": (200, "application/json", b"{not json", {}),
            "/text": (200, "text/plain; charset=utf-8", "héllo".encode(), {}),
            "/binary": (200, "application/octet-stream", b"\x00\x01\xff", {}),
            "/empty": (204, "", b"", {}),
            "/missing": (404, "text/plain", b"no such order " + b"x" * 5000, {}),
            "/revoked": (
                401,
                "application/json",
                b'{"error": {"message": "token sk-live-0123456789abcdef is revoked"}, '
                b'"token": "t0ken-value"}',
                {},
            ),
            "/unavailable": (503, "text/plain", b"down for maintenance", {}),
            "/throttled": (429, "application/json", b'{"error":"slow down"}', {"Retry-After": "7"}),
            "/redirect": (302, "", b"", {"Location": "/json"}),
            "/see-other": (303, "", b"", {"Location": "/echo"}),
            "/temporary": (307, "", b"", {"Location": "/echo"}),
            "/permanent": (308, "", b"", {"Location": "/echo"}),
            "/to-private": (302, "", b"", {"Location": "http://10.0.0.1/"}),
            "/to-metadata": (
                301,
                "",
                b"",
                {"Location": "http://169.254.169.254/latest/meta-data/iam/"},
            ),
            "/to-file": (302, "", b"", {"Location": "file:///etc/passwd"}),
            "/loop": (302, "", b"", {"Location": "/loop"}),
            "/cross-origin": (
                307,
                "",
                b"",
                {"Location": f"http://other.test:{self.server.port}/echo"},
            ),
        }
        if path == "/to":  # a redirect to the Location in the query (?location=...)
            location = parse_qs(urlsplit(self.path).query)["location"][0]
            status, ctype, payload, extra = 302, "", b"", {"Location": location}
        elif path == "/bad-gzip":
            status, ctype, payload = 200, "text/plain", b"this is not gzip"
            extra = {"Content-Encoding": "gzip"}
        elif path == "/slow":
            self.server.slow_answers.wait(60)
            status, ctype, payload, extra = 200, "text/plain", b"late", {}
        elif path == "/echo":
            status, ctype, extra = 200, "application/json", {}
            payload = json.dumps(seen).encode()
        else:
            status, ctype, payload, extra = routes.get(path, (404, "text/plain", b"?", {}))
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        for name, value in extra.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Set-Cookie", "session=from-server; Path=/")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)


@pytest.fixture
def server() -> Iterator[CountingServer]:
    srv = CountingServer()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        # A request to this server takes milliseconds; the default timeout leaves a loaded
        # machine room (the timeout tests pass their own)
        with override_settings(ssrf_allow=["127.0.0.1"], http_timeout_seconds=30.0):
            yield srv
    finally:
        srv.slow_answers.set()
        srv.shutdown()
        srv.server_close()
        http.close_client()


def url(server: CountingServer, path: str) -> str:
    return f"http://127.0.0.1:{server.port}{path}"


def to_loopback(host: str, port: int) -> list[str]:
    return ["127.0.0.1"]


def test_a_json_answer_is_parsed(server):
    response = http.request("GET", url(server, "/json"), params={"q": "a b"})
    http.raise_for_status(response)
    assert http.parse_body(response) == {"ok": True, "n": 1}
    assert server.requests[-1]["path"] == "/json?q=a+b"


def test_request_sends_json_and_headers(server):
    response = http.request(
        "post", url(server, "/echo"), json={"order": "A-1"}, headers={"X-Trace": "t-1"}
    )
    seen = http.parse_body(response)
    assert seen["method"] == "POST"
    assert json.loads(seen["body"]) == {"order": "A-1"}
    assert seen["headers"]["content-type"] == "application/json"
    assert seen["headers"]["x-trace"] == "t-1"
    assert seen["headers"]["user-agent"] == "Relayflow"


def test_content_and_json_together_are_refused(server):
    with pytest.raises(InvalidArgsError):
        http.request("POST", url(server, "/echo"), content=b"x", json={"a": 1})


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/text", "héllo"),
        ("/bad-json", "{not json"),
        ("/empty", None),
        ("/binary", {"content_type": "application/octet-stream", "base64": "AAH/"}),
    ],
)
def test_bodies_are_parsed_by_content_type(server, path, expected):
    response = http.request("GET", url(server, path))
    http.raise_for_status(response)
    assert http.parse_body(response) == expected


def test_a_404_is_an_http_error_with_status_and_truncated_body(server):
    response = http.request("GET", url(server, "/missing"))
    with pytest.raises(HttpError) as caught:
        http.raise_for_status(response)
    error = caught.value
    assert error.error_name == "Relayflow.HttpError"
    assert error.details["status"] == 404
    assert error.details["body"].startswith("no such order xxx")
    # At most 4 KB, the "…" mark included
    assert len(error.details["body"].encode()) == http.ERROR_BODY_LIMIT == 4096
    assert error.details["body"].endswith("…")
    # (a text body that long gives no reason: the message is the status alone)
    assert error.message == f"GET http://127.0.0.1:{server.port}/… answered 404 Not Found"


def test_an_error_message_carries_the_bodys_reason_and_never_a_credential(server):
    # Given an endpoint that refuses with a JSON reason echoing the caller's token
    response = http.request(
        "GET",
        url(server, "/revoked"),
        headers={"Authorization": "Bearer sk-live-0123456789abcdef"},
    )
    with pytest.raises(HttpError) as caught:
        http.raise_for_status(response)
    # Then the message says why, and neither it nor the body excerpt holds the token
    error = caught.value
    assert error.message.endswith("answered 401 Unauthorized: token [redacted] is revoked")
    assert "0123456789abcdef" not in json.dumps(error.to_dict())
    assert "t0ken-value" not in error.details["body"]
    assert error.details["status"] == 401 and '"token": "[redacted]"' in error.details["body"]


def test_a_503_is_transient(server):
    response = http.request("GET", url(server, "/unavailable"))
    with pytest.raises(TransientError) as caught:
        http.raise_for_status(response)
    assert caught.value.details == {"status": 503, "body": "down for maintenance"}


def test_a_429_is_transient_with_retry_after(server):
    response = http.request("GET", url(server, "/throttled"))
    with pytest.raises(TransientError) as caught:
        http.raise_for_status(response)
    assert caught.value.details["status"] == 429
    assert caught.value.details["retry_after"] == 7
    assert caught.value.details["body"] == '{"error":"slow down"}'


def test_a_server_slower_than_the_timeout_is_transient(server):
    # Given a server that answers /slow only once the test is over: only the client's own
    # timeout can end the request
    with pytest.raises(TransientError, match=r"timed out after 0\.3 s"):
        http.request("GET", url(server, "/slow"), timeout=0.3)


def test_a_refused_connection_is_transient():
    # Given a port nothing listens on
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (
        override_settings(ssrf_allow=["127.0.0.1"]),
        pytest.raises(TransientError, match="failed"),
    ):
        http.request("GET", f"http://127.0.0.1:{port}/", timeout=1)


def test_a_redirect_to_an_allowed_path_is_followed(server):
    response = http.request("GET", url(server, "/redirect"))
    assert response.status_code == 200
    assert http.parse_body(response) == {"ok": True, "n": 1}
    assert [r.status_code for r in response.history] == [302]
    assert [r["path"] for r in server.requests] == ["/redirect", "/json"]


def test_303_continues_as_get_without_a_body(server):
    response = http.request("POST", url(server, "/see-other"), json={"a": 1})
    seen = http.parse_body(response)
    assert (seen["method"], seen["body"]) == ("GET", "")
    assert "content-type" not in seen["headers"]


@pytest.mark.parametrize("path", ["/temporary", "/permanent"])
def test_307_and_308_keep_method_and_body(server, path):
    response = http.request("PUT", url(server, path), content=b"payload")
    seen = http.parse_body(response)
    assert (seen["method"], seen["body"]) == ("PUT", "payload")


def test_authorization_is_dropped_on_a_cross_origin_redirect(server):
    # Given other.test resolving to the same server: a different origin, an allowed address
    response = http.request(
        "POST",
        url(server, "/cross-origin"),
        content=b"x",
        headers={"Authorization": "Bearer s3cret", "Cookie": "a=b", "X-Keep": "1"},
        resolver=to_loopback,
    )
    first, second = server.requests
    assert first["headers"]["authorization"] == "Bearer s3cret"
    assert "authorization" not in second["headers"]
    assert "cookie" not in second["headers"]
    assert second["headers"]["x-keep"] == "1"
    assert second["headers"]["host"] == f"other.test:{server.port}"
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("path", "rule"),
    [("/to-private", "private"), ("/to-metadata", "metadata"), ("/to-file", "scheme")],
)
def test_a_redirect_to_a_blocked_target_is_refused_before_connecting(server, path, rule):
    with pytest.raises(SsrfBlocked, match=rule):
        http.request("GET", url(server, path), timeout=10)
    # Only the first hop reached a server; 10.0.0.1 would have taken the whole timeout (and
    # failed as Relayflow.Transient)
    assert [r["path"] for r in server.requests] == [path]


def test_too_many_redirects_is_transient(server):
    with pytest.raises(TransientError, match="redirected more than 3 times"):
        http.request("GET", url(server, "/loop"), max_redirects=3)
    assert len(server.requests) == 4


def test_max_redirects_zero_returns_the_redirect_unfollowed(server):
    response = http.request("GET", url(server, "/cross-origin"), max_redirects=0)
    assert response.status_code == 307
    assert len(server.requests) == 1
    with pytest.raises(HttpError) as caught:
        http.raise_for_status(response)
    assert caught.value.details["status"] == 307


BAD_LOCATIONS = [
    "http:169.254.169.254/",  # a scheme, no host: httpx raised a raw InvalidURL
    "https:",
    "http:///latest/meta-data/",
    "http://[::1",  # httpx raised RemoteProtocolError, which read as a retryable failure
    "http://x:abc/",
    "//:99999/",
]


@pytest.mark.parametrize("max_redirects", [0, 1, 5])
@pytest.mark.parametrize("location", BAD_LOCATIONS)
def test_a_redirect_to_an_invalid_url_is_a_named_error_at_any_max_redirects(
    server, location, max_redirects
):
    # Given a server that redirects to a Location that is not a fetchable URL
    target = url(server, "/to") + "?" + urlencode({"location": location})
    if max_redirects == 0:
        # When redirects are not followed / Then the 3xx comes back with its Location
        response = http.request("GET", target, max_redirects=0)
        assert response.status_code == 302
        assert response.headers["Location"] == location
        return
    # When it is followed / Then the guard refuses it by name, and it is not retryable
    with pytest.raises(SsrfBlocked) as caught:
        http.request("GET", target, max_redirects=max_redirects)
    assert caught.value.details["rule"] == "invalid-url"
    assert not caught.value.retryable
    assert len(server.requests) == 1


def test_a_redirect_to_another_scheme_without_a_host_is_refused_by_its_scheme(server):
    target = url(server, "/to") + "?" + urlencode({"location": "ftp:x"})
    with pytest.raises(SsrfBlocked) as caught:
        http.request("GET", target)
    assert caught.value.details["rule"] == "scheme"


def test_a_body_that_does_not_decode_is_a_named_error_not_retried(server):
    with pytest.raises(HttpError, match="does not decode") as caught:
        http.request("GET", url(server, "/bad-gzip"))
    assert not caught.value.retryable


def test_a_json_body_that_cannot_be_encoded_is_invalid_args(server):
    with pytest.raises(InvalidArgsError, match="cannot be built"):
        http.request("POST", url(server, "/echo"), json={"x": float("nan")})
    assert server.requests == []


def test_a_blocked_url_never_reaches_the_network(server):
    with override_settings(ssrf_allow=[]), pytest.raises(SsrfBlocked, match="loopback"):
        http.request("GET", url(server, "/json"))
    assert server.connections == 0


def test_dns_rebinding_cannot_move_the_connection(server, monkeypatch):
    # Given a name that resolves to the allowed 127.0.0.1 once, then to a private address
    answers = iter([["127.0.0.1"], ["10.0.0.1"]])
    asked: list[str] = []

    def rebinding_resolver(host: str, port: int) -> list[str]:
        asked.append(host)
        return next(answers)

    system_lookups: list[str] = []
    real_getaddrinfo = socket.getaddrinfo

    def spy_getaddrinfo(host, *args, **kwargs):
        system_lookups.append(host)
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", spy_getaddrinfo)

    # When a request goes to that name
    target = f"http://rebind.test:{server.port}/echo"
    response = http.request("GET", target, resolver=rebinding_resolver)

    # Then the name was resolved once, by the guard, and the socket dialled the checked address
    assert asked == ["rebind.test"]
    assert "rebind.test" not in system_lookups
    assert system_lookups == ["127.0.0.1"]  # socket.create_connection parsing the literal
    # and the server saw the real host name in the Host header
    assert http.parse_body(response)["headers"]["host"] == f"rebind.test:{server.port}"

    # When the name is requested again, the new answer is checked, and refused
    with pytest.raises(SsrfBlocked, match=r"10\.0\.0\.1 is a private address"):
        http.request("GET", target, resolver=rebinding_resolver)
    assert asked == ["rebind.test", "rebind.test"]


def test_the_shared_client_cannot_reach_a_host_the_guard_did_not_check(server):
    # Even code that takes the shared client directly cannot bypass the guard
    with pytest.raises(Exception, match="not checked by the SSRF guard"):
        http._get_client().get(url(server, "/json"))
    assert server.connections == 0


def test_connections_are_reused_across_requests(server):
    first = http.request("GET", url(server, "/json"))
    second = http.request("POST", url(server, "/echo"), content=b"again")
    assert (first.status_code, second.status_code) == (200, 200)
    assert len(server.requests) == 2
    assert server.connections == 1


def test_server_cookies_are_not_kept_between_requests(server):
    http.request("GET", url(server, "/json"))  # answers with Set-Cookie
    seen = http.parse_body(http.request("GET", url(server, "/echo")))
    assert "cookie" not in seen["headers"]


def test_a_signed_body_verifies_and_a_tampered_one_does_not():
    body = b'{"event":"order.paid"}'
    signature = http.sign_body(body, "whsec_1")
    assert signature.startswith("sha256=") and len(signature) == 7 + 64
    assert http.verify_signature(body, "whsec_1", signature)
    assert http.verify_signature(body, "whsec_1", signature.upper())
    assert not http.verify_signature(body + b" ", "whsec_1", signature)
    assert not http.verify_signature(body, "other", signature)
    assert not http.verify_signature(body, "whsec_1", None)
    assert not http.verify_signature(body, "whsec_1", "sha256=zz\u00e9")


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "Bearer s3cret\nX-Injected: 1"},
        {"Authorization": "Bearer s3crét"},
        {"Bad Name": "s3cret"},
    ],
)
def test_a_header_http_cannot_carry_is_refused_without_quoting_it(server, headers):
    with pytest.raises(InvalidArgsError) as caught:
        http.request("GET", url(server, "/json"), headers=headers)
    assert "s3cr" not in str(caught.value.to_dict())
    assert caught.value.__cause__ is None
    assert server.requests == []


def test_retry_after_as_an_http_date_is_seconds_from_now():
    from datetime import UTC, datetime, timedelta
    from email.utils import format_datetime

    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    response = httpx.Response(503, headers={"Retry-After": when})
    with pytest.raises(TransientError) as caught:
        http.raise_for_status(response)
    assert 28 <= caught.value.details["retry_after"] <= 30
    assert caught.value.message == "HTTP request answered 503 Service Unavailable"


def test_an_unparsable_retry_after_is_left_out():
    with pytest.raises(TransientError) as caught:
        http.raise_for_status(httpx.Response(429, headers={"Retry-After": "soon"}))
    assert "retry_after" not in caught.value.details


def test_a_large_binary_body_is_cut_at_the_limit():
    raw = b"\xff" * (http.BINARY_BODY_LIMIT + 10)
    parsed = http.parse_body(
        httpx.Response(200, content=raw, headers={"Content-Type": "image/png"})
    )
    assert parsed["content_type"] == "image/png"
    assert parsed["truncated"] is True
    assert len(base64.b64decode(parsed["base64"])) == http.BINARY_BODY_LIMIT


_URLISH = st.lists(
    st.sampled_from([*"abcxyz019:/?#[]@!$&'()*+,;=%.-_~ ", "169.254.169.254", "::", "\\"]),
    max_size=20,
).map("".join)


@settings(
    max_examples=80,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    location=st.one_of(
        _URLISH,
        st.builds(
            lambda s, rest: s + rest,
            st.sampled_from(["http:", "https:", "http://", "//", "http://[", "ftp:", "HTTP:"]),
            _URLISH,
        ),
    ),
    max_redirects=st.integers(min_value=0, max_value=3),
)
def test_any_location_ends_in_a_response_or_a_named_relayflow_error(
    server, location, max_redirects
):
    # Given any Location a server may send, at any max_redirects
    target = url(server, "/to") + "?" + urlencode({"location": location})
    # When it is followed / Then the outcome is a response or a Relayflow error, never httpx's
    try:
        response = http.request("GET", target, max_redirects=max_redirects, timeout=2)
    except RelayflowError as exc:
        assert isinstance(exc, SsrfBlocked | TransientError | HttpError), exc
        if isinstance(exc, SsrfBlocked):
            assert not exc.retryable
    else:
        assert response.status_code in (200, 302, 404)
