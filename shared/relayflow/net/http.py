"""The guarded HTTP client: every outbound call of a step goes through :func:`request`.

Each request, and each redirect hop, passes :func:`relayflow.net.ssrf.check_url`; the TCP
connection is then dialled to an address that check returned, never to a fresh DNS answer, so
a name that resolves to a public address at check time and to ``169.254.169.254`` a moment
later (DNS rebinding) cannot reach the metadata service. The pinning lives in a httpcore
network backend, below TLS: the ``Host`` header, SNI and certificate verification all stay on
the host name.

One ``httpx.Client`` is created on first use and kept for the life of the process, so a warm
Lambda reuses its connections. It keeps no cookies, reads no proxy or certificate settings
from the environment, and follows no redirects itself. Nothing here logs request headers or
bodies; error messages name the method and the URL's origin only (:func:`redact_url`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json as jsonlib
import math
import re
import threading
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from http.cookiejar import CookieJar, CookiePolicy
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

from relayflow.errors import HttpError, InvalidArgsError, SsrfBlocked, TransientError
from relayflow.net.ssrf import DEFAULT_PORTS, Resolver, Target, check_url, normalise_host
from relayflow.net.ssrf import redact_url as _redact
from relayflow.settings import get_settings

#: Statuses worth retrying: the same request may succeed later.
TRANSIENT_STATUSES: frozenset[int] = frozenset({408, 429, 502, 503, 504})
REDIRECT_STATUSES: frozenset[int] = frozenset({301, 302, 303, 307, 308})
#: How much of an error response's body goes into the error's ``details`` (bytes).
ERROR_BODY_LIMIT = 4096
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: How much of an error body is parsed to find its reason.
_REASON_SCAN_LIMIT = 256 * 1024
#: What a credential in an error body is replaced by.
REDACTED = "[redacted]"
#: Credentials a server may echo back in an error body: API keys (``sk-…``, ``sk-ant-…``),
#: bearer tokens and AWS access key ids, replaced whole …
_CREDENTIAL_TOKEN = re.compile(
    r"\b(?:sk|rk|pk)-[A-Za-z0-9_-]{12,}|\bBearer\s+[A-Za-z0-9._~+/=-]{8,}"
    r"|\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",
    re.IGNORECASE,
)
#: … and the values of fields named like credentials (``"api_key": "…"``, ``token=…``).
_CREDENTIAL_FIELD = re.compile(
    r"""((?:api[_-]?key|apikey|access[_-]?token|token|secret|password|authorization)"""
    r"""["']?\s*[:=]\s*["']?)([^"'\s,;&}]+)""",
    re.IGNORECASE,
)
#: Largest binary body :func:`parse_body` encodes; the rest is cut off.
BINARY_BODY_LIMIT = 1024 * 1024
SIGNATURE_HEADER = "X-Relayflow-Signature"
USER_AGENT = "Relayflow"

#: Where :func:`_hold_location` keeps a redirect's ``Location`` while httpx looks at the
#: response (``Response.extensions``).
_LOCATION = "relayflow.location"

# Headers that must not follow a redirect to another origin.
_CREDENTIAL_HEADERS = ("authorization", "proxy-authorization", "cookie")
_BODY_HEADERS = ("content-type", "content-length", "transfer-encoding", "content-encoding")


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Any = _Unset()

# (host, port) -> the checked addresses, for the request being sent in this context. A context
# variable keeps concurrent requests in different threads from seeing each other's pins.
_pins: ContextVar[Mapping[tuple[str, int], tuple[str, ...]] | None] = ContextVar(
    "relayflow_http_pins", default=None
)
_client: httpx.Client | None = None
_client_lock = threading.Lock()


def request(
    method: str,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, Any] | None = None,
    content: bytes | None = None,
    json: Any = _UNSET,
    timeout: float | None = None,
    max_redirects: int = 5,
    allow: Iterable[str] | None = None,
    resolver: Resolver | None = None,
) -> httpx.Response:
    """Send one HTTP request through the SSRF guard and return the final response (read).

    Redirects (301/302/303/307/308) are followed up to ``max_redirects`` times, each hop
    checked again. 303 (and 301/302 for methods that browsers rewrite) continue as ``GET``
    without a body; 307/308 keep method and body; ``Authorization``, ``Proxy-Authorization``
    and ``Cookie`` are dropped when the origin changes. ``max_redirects=0`` follows none and
    returns the 3xx response (:func:`raise_for_status` turns it into ``HttpError``).
    ``timeout`` (seconds, default ``http_timeout_seconds``) applies to connect, read, write
    and pool wait each. ``allow`` and ``resolver`` are passed to :func:`check_url`.

    The status is not judged: call :func:`raise_for_status`. Every failure is a named error,
    never httpx's own: ``SsrfBlocked`` for a refused URL or redirect target (including a
    ``Location`` that is not a URL or names a scheme but no host), ``TransientError`` for
    network errors, timeouts and too many redirects, ``InvalidArgsError`` for both
    ``content`` and ``json``, a body or parameters that cannot be encoded, or headers HTTP
    cannot carry (the message never quotes a header value), ``HttpError`` for a response
    body that does not decode.
    """
    if content is not None and json is not _UNSET:
        raise InvalidArgsError("pass either content or json, not both")
    if _CONTROL.search(url):
        # httpx would refuse it after the guard's DNS lookup; no lookup for a URL that
        # cannot be sent.
        raise InvalidArgsError(
            f"{method.upper()} {_redact(url)}: the URL holds control characters",
            url=_redact(url),
        )
    seconds = get_settings().http_timeout_seconds if timeout is None else float(timeout)
    allow_list = None if allow is None else list(allow)
    client = _get_client()
    method = method.upper()
    body: dict[str, Any] = {"content": content} if json is _UNSET else {"json": json}
    current_url: httpx.URL | str = url
    current_params = params
    try:
        current_headers = httpx.Headers(headers or {})
    except UnicodeEncodeError:
        # The error holds the whole header value, which may be a credential: not kept.
        raise InvalidArgsError(
            f"{method} {_redact(url)}: request headers must be ASCII", url=_redact(url)
        ) from None
    history: list[httpx.Response] = []

    while True:
        target = check_url(str(current_url), allow=allow_list, resolver=resolver)
        outgoing = _build(
            client, method, current_url, current_headers, current_params, body, seconds
        )
        _require_same_target(outgoing.url, target)
        response = _send(client, outgoing, target, seconds)

        location = response.extensions.get(_LOCATION)
        _restore_location(response)
        if response.status_code not in REDIRECT_STATUSES or not location or max_redirects <= 0:
            response.history = history
            return response
        if len(history) >= max_redirects:
            raise TransientError(
                f"{method} {_redact(url)} was redirected more than {max_redirects} times",
                url=_redact(url),
                max_redirects=max_redirects,
            )
        history.append(response)
        next_url = _redirect_target(outgoing.url, location)
        new_method = _redirect_method(method, response.status_code)
        if new_method != method:
            method = new_method
            body = {"content": None}
            for name in _BODY_HEADERS:
                current_headers.pop(name, None)
        current_headers.pop("host", None)
        if _origin(next_url) != _origin(outgoing.url):
            for name in _CREDENTIAL_HEADERS:
                current_headers.pop(name, None)
        current_url, current_params = next_url, None


def _redirect_target(base: httpx.URL, location: str) -> httpx.URL:
    """Where a ``Location`` points, resolved against ``base`` (RFC 3986). A value that is
    not a URL, or names a scheme but no host (``http:169.254.169.254/``, which httpx would
    quietly send to the current host), is refused: no guess about what the server meant.
    Other schemes are left to :func:`check_url`, which refuses them by name."""
    shown = _redact(base)
    try:
        written = urlsplit(location.strip())
        if written.scheme.lower() in DEFAULT_PORTS and not written.hostname:
            # RFC 3986 reads it as an absolute URL with no host; httpx's join reads it as a
            # path on the current host. Neither is what a server should send.
            raise ValueError("an absolute URL without a host")
        target = base.join(location)
        if target.scheme in DEFAULT_PORTS and not target.host:
            raise ValueError("no host")
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise SsrfBlocked(
            f"blocked: redirect to an invalid URL (from {shown})",
            url=shown,
            rule="invalid-url",
        ) from exc
    return target


def raise_for_status(response: httpx.Response, secrets: Iterable[str] = ()) -> None:
    """Return for a 2xx response; otherwise raise the named error Step Functions matches on.

    408, 429, 502, 503 and 504 raise ``TransientError`` (``status``, ``body``, and
    ``retry_after`` in seconds when the server sent ``Retry-After``); any other status raises
    ``HttpError`` (``status``, ``body``). ``body`` is :func:`error_excerpt` of the response
    (at most :data:`ERROR_BODY_LIMIT` bytes, credentials redacted: ``secrets`` and the values
    of the request's credential headers included), and the message ends with the reason the
    body gives, when it names one (``error.message``, ``message``…).
    """
    status = response.status_code
    if 200 <= status < 300:
        return
    where = _describe(response)
    hidden = [*secrets, *_credential_values(response)]
    message = f"{where} answered {status} {response.reason_phrase}".rstrip()
    reason = body_reason(response, hidden)
    if reason:
        message = f"{message}: {reason}"
    details: dict[str, Any] = {"status": status, "body": error_excerpt(response, hidden)}
    if status in TRANSIENT_STATUSES:
        retry_after = _retry_after_seconds(response.headers.get("Retry-After"))
        if retry_after is not None:
            details["retry_after"] = retry_after
        raise TransientError(message, **details)
    raise HttpError(message, **details)


def truncate_body(response: httpx.Response, limit: int = ERROR_BODY_LIMIT) -> str:
    """The start of ``response``'s body as text (at most ``limit`` bytes, ``…`` included
    when cut)."""
    raw = response.content
    if len(raw) <= limit:
        return raw.decode(response.encoding or "utf-8", errors="replace")
    cut = raw[: max(0, limit - 3)].decode(response.encoding or "utf-8", errors="ignore")
    return cut + "…"


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with each of ``secrets`` (longer than 3 characters) and anything shaped like
    a credential (:data:`_CREDENTIAL_TOKEN`, :data:`_CREDENTIAL_FIELD`) replaced by
    :data:`REDACTED`."""
    for secret in sorted({s for s in secrets if s and len(s) > 3}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    text = _CREDENTIAL_TOKEN.sub(REDACTED, text)
    return _CREDENTIAL_FIELD.sub(lambda m: m.group(1) + REDACTED, text)


def error_excerpt(
    response: httpx.Response, secrets: Iterable[str] = (), limit: int = ERROR_BODY_LIMIT
) -> str:
    """What an error keeps of a response body: the first ``limit`` bytes as text, with
    credentials redacted (:func:`redact`)."""
    return redact(truncate_body(response, limit), secrets)


def body_reason(response: httpx.Response, secrets: Iterable[str] = (), limit: int = 500) -> str:
    """The reason an error body gives, redacted and cut to ``limit`` characters: JSON's
    ``error.message`` (Anthropic, OpenAI and most APIs), ``message``, ``error`` or
    ``detail`` when it is text; a short text body as it is; else ``""``."""
    raw = response.content[:_REASON_SCAN_LIMIT]
    text = raw.decode(response.encoding or "utf-8", errors="replace").strip()
    reason = ""
    try:
        parsed = jsonlib.loads(text)
    except ValueError:
        media = response.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        if len(text) <= limit and (media.startswith("text/plain") or not media):
            reason = text
    else:
        reason = _json_reason(parsed)
    reason = " ".join(redact(reason, secrets).split())
    return reason if len(reason) <= limit else reason[: limit - 1] + "…"


def _json_reason(parsed: Any) -> str:
    if not isinstance(parsed, dict):
        return ""
    error = parsed.get("error")
    if isinstance(error, dict):
        for key in ("message", "detail", "type", "code"):
            if isinstance(error.get(key), str) and error[key].strip():
                return str(error[key])
    for key in ("message", "error", "detail", "error_description"):
        if isinstance(parsed.get(key), str) and parsed[key].strip():
            return str(parsed[key])
    return ""


def _credential_values(response: httpx.Response) -> list[str]:
    """The values of the request's credential headers (and the secret part of each)."""
    try:
        sent = response.request
    except RuntimeError:
        return []
    values: list[str] = []
    for name in (*_CREDENTIAL_HEADERS, "x-api-key"):
        value = sent.headers.get(name)
        if value:
            values += [value, value.split(" ", 1)[-1]]
    return values


def parse_body(response: httpx.Response) -> Any:
    """The response body as a value a step can output.

    Empty → ``None``; JSON (``application/json``, ``*+json``) → the parsed value, or the text
    when it does not parse; ``text/*`` → the text; no ``Content-Type`` → the text if it is
    UTF-8; anything else → ``{"content_type", "base64"}`` of at most :data:`BINARY_BODY_LIMIT`
    bytes, with ``"truncated": True`` when the body was longer.
    """
    raw = response.content
    if not raw:
        return None
    content_type = response.headers.get("Content-Type", "")
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type == "application/json" or media_type.endswith("+json"):
        try:
            return jsonlib.loads(response.text)
        except ValueError:
            return response.text
    if media_type.startswith("text/"):
        return response.text
    if not media_type:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            pass
    encoded: dict[str, Any] = {
        "content_type": content_type or "application/octet-stream",
        "base64": base64.b64encode(raw[:BINARY_BODY_LIMIT]).decode("ascii"),
    }
    if len(raw) > BINARY_BODY_LIMIT:
        encoded["truncated"] = True
    return encoded


def sign_body(body: bytes, secret: str) -> str:
    """``sha256=<hex HMAC-SHA256 of body>``: the value of :data:`SIGNATURE_HEADER`."""
    digest = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def verify_signature(body: bytes, secret: str, header_value: str | None) -> bool:
    """Whether ``header_value`` is :func:`sign_body` of ``body`` (constant-time compare)."""
    if not header_value:
        return False
    expected = sign_body(body, secret).encode("ascii")
    return hmac.compare_digest(expected, header_value.strip().lower().encode("utf-8"))


def close_client() -> None:
    """Close the shared client and its connections; the next request opens a new one."""
    global _client
    with _client_lock:
        if _client is not None:
            _client.close()
            _client = None


class _PinnedBackend(httpcore.NetworkBackend):
    """Dials only the addresses :func:`check_url` returned for the request in flight.

    httpcore asks for ``(host name, port)``; this answers with a socket to one of the pinned
    addresses, without a DNS lookup. A host with no pin is refused: nothing reaches the
    network through this client unless it passed the guard.
    """

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        pins = _pins.get() or {}
        addresses = pins.get((normalise_host(host), port))
        if not addresses:
            raise httpcore.ConnectError(f"{host}:{port} was not checked by the SSRF guard")
        failure: Exception | None = None
        for address in addresses:
            try:
                return self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not reachable through the SSRF guard")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _PinnedTransport(httpx.HTTPTransport):
    """httpx's transport (request/response and error mapping) over a pool that uses
    :class:`_PinnedBackend`. ``HTTPTransport.__init__`` only builds ``_pool``, and has no
    ``network_backend`` argument, so it is not called: building its pool would load the
    certificate store a second time on every cold start."""

    def __init__(self) -> None:
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=50,
            max_keepalive_connections=20,
            keepalive_expiry=30.0,
            network_backend=_PinnedBackend(),
        )


class _NoCookies(CookiePolicy):
    """The client is shared by every run in the process: no cookie may carry over."""

    netscape = True
    rfc2965 = False
    hide_cookie2 = True

    def set_ok(self, cookie: Any, request: Any) -> bool:
        return False

    def return_ok(self, cookie: Any, request: Any) -> bool:
        return False

    def domain_return_ok(self, domain: str, request: Any) -> bool:
        return False

    def path_return_ok(self, path: str, request: Any) -> bool:
        return False


def _get_client() -> httpx.Client:
    global _client
    if _client is None:
        with _client_lock:
            if _client is None:
                _client = httpx.Client(
                    transport=_PinnedTransport(),
                    trust_env=False,
                    follow_redirects=False,
                    cookies=CookieJar(policy=_NoCookies()),
                    headers={"User-Agent": USER_AGENT},
                    event_hooks={"response": [_hold_location]},
                )
    return _client


def _hold_location(response: httpx.Response) -> None:
    """Take a redirect's ``Location`` out of httpx's sight, into ``response.extensions``.

    httpx builds the next request of every redirect, even when it follows none, and raises
    its own errors there for a Location it cannot parse (``InvalidURL``, or a
    ``RemoteProtocolError`` that would read as a retryable network failure). :func:`request`
    resolves the Location itself (:func:`_redirect_target`) and puts the header back."""
    if response.status_code in REDIRECT_STATUSES and "Location" in response.headers:
        response.extensions[_LOCATION] = response.headers["Location"]
        del response.headers["Location"]


def _restore_location(response: httpx.Response) -> None:
    location = response.extensions.get(_LOCATION)
    if location is not None and "Location" not in response.headers:
        response.headers["Location"] = location


def _build(
    client: httpx.Client,
    method: str,
    url: httpx.URL | str,
    headers: httpx.Headers,
    params: Mapping[str, Any] | None,
    body: Mapping[str, Any],
    seconds: float,
) -> httpx.Request:
    try:
        return client.build_request(
            method, url, headers=headers, params=params, timeout=httpx.Timeout(seconds), **body
        )
    except httpx.InvalidURL as exc:
        shown = _redact(url)
        raise SsrfBlocked(
            f"blocked: the HTTP client cannot parse the URL ({exc}) (url {shown})",
            url=shown,
            rule="invalid-url",
        ) from exc
    except (TypeError, ValueError, UnicodeError) as exc:
        # A body or parameter httpx cannot encode (json with NaN, a set, bytes keys...).
        shown = _redact(url)
        raise InvalidArgsError(
            f"{method} {shown}: the request cannot be built ({type(exc).__name__})", url=shown
        ) from None


def _require_same_target(url: httpx.URL, target: Target) -> None:
    """The guard and httpx parse URLs separately; refuse any URL they read differently."""
    host = normalise_host(url.raw_host.decode("ascii"))
    port = url.port or DEFAULT_PORTS.get(url.scheme)
    if (url.scheme, host, port) != (target.scheme, target.host, target.port):
        shown = _redact(target.url)
        raise SsrfBlocked(
            f"blocked: the URL is ambiguous, it names {target.host}:{target.port} to the guard "
            f"and {host}:{port} to the HTTP client (url {shown})",
            url=shown,
            rule="ambiguous-url",
        )


def _send(
    client: httpx.Client, outgoing: httpx.Request, target: Target, seconds: float
) -> httpx.Response:
    where = f"{outgoing.method} {_redact(outgoing.url)}"
    # An IPv4-mapped answer is dialled as the IPv4 address it is; Lambda may lack IPv6.
    dial = tuple(str(getattr(a, "ipv4_mapped", None) or a) for a in target.addresses)
    token = _pins.set({(target.host, target.port): dial})
    try:
        return client.send(outgoing)
    except httpx.TimeoutException as exc:
        raise TransientError(
            f"{where} timed out after {seconds:g} s ({_timeout_phase(exc)})",
            url=_redact(outgoing.url),
        ) from exc
    except httpx.LocalProtocolError:
        # h11's message quotes the offending header, which may be a credential: not kept.
        raise InvalidArgsError(
            f"{where}: a request header name or value holds characters HTTP does not allow",
            url=_redact(outgoing.url),
        ) from None
    except httpx.TransportError as exc:
        reason = str(exc)[:200] or type(exc).__name__
        raise TransientError(f"{where} failed: {reason}", url=_redact(outgoing.url)) from exc
    except httpx.DecodingError as exc:
        # The server's Content-Encoding does not decode: asking again gets the same bytes.
        raise HttpError(
            f"{where}: the response body does not decode ({str(exc)[:200]})",
            url=_redact(outgoing.url),
        ) from exc
    except httpx.HTTPError as exc:  # every other failure of httpx, named and not retried
        raise HttpError(f"{where} failed: {type(exc).__name__}", url=_redact(outgoing.url)) from exc
    finally:
        _pins.reset(token)


def _timeout_phase(exc: httpx.TimeoutException) -> str:
    return {
        httpx.ConnectTimeout: "connect",
        httpx.ReadTimeout: "read",
        httpx.WriteTimeout: "write",
        httpx.PoolTimeout: "waiting for a connection",
    }.get(type(exc), "timeout")


def _redirect_method(method: str, status: int) -> str:
    # The rewrites browsers and httpx apply; 307 and 308 never change the method.
    if status == 303 and method != "HEAD":
        return "GET"
    if status == 302 and method != "HEAD":
        return "GET"
    if status == 301 and method == "POST":
        return "GET"
    return method


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, normalise_host(url.host), url.port or DEFAULT_PORTS.get(url.scheme)


def _describe(response: httpx.Response) -> str:
    try:
        sent = response.request
    except RuntimeError:
        return "HTTP request"
    return f"{sent.method} {_redact(sent.url)}"


def _retry_after_seconds(value: str | None) -> int | None:
    """``Retry-After`` as whole seconds from now: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return int(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0, math.ceil((when - datetime.now(UTC)).total_seconds()))
