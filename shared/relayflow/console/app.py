"""The console's request handling: sign-in, pages and the actions they post.

Sign-in: the console asks for an API key (``/console/login``), checks it against the control
API and keeps it server-side under a random session id; the ``HttpOnly``, ``SameSite=Strict``
cookie scoped to ``/console`` holds only that id (the key never goes back to the browser).
Every page and action then calls the control API with the session's key, so the console shows
and does what the key's tenant may, nothing more. Sessions live in the server's memory: a
restart signs everyone out. ``relayflow serve`` prints a sign-in link carrying the local key
in the URL *fragment* (``/console/login#key=…``), which the browser never sends to a server
or writes to an access log; ``static/login.js`` moves it into the form but never submits it,
so no other page can sign a browser into another tenant (login CSRF): signing in is the
user's click. Actions are HTML form POSTs (post/redirect/get: each answers 303 to the page to
show next, with a notice or the API's error message); a POST whose ``Origin`` (scheme and
host) is not the console's is refused, on top of the cookie's ``SameSite=Strict``. Every
answer carries a Content-Security-Policy allowing scripts from the console only, ``nosniff``
and ``Referrer-Policy: no-referrer``; a redirect target holding a control character is never
sent.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from relayflow.console.api import ApiFailure, ConsoleApi, Transport, segment
from relayflow.console.forms import parse_input
from relayflow.console.html import BASE, HTMX_FILE, flash, page
from relayflow.console.pages import (
    approvals_page,
    breakers_page,
    dlq_page,
    run_live,
    run_page,
    runs_page,
    workflow_page,
    workflows_page,
)

COOKIE = "rf_console_session"
LOGIN_SCRIPT = "login.js"
_JS = "application/javascript; charset=utf-8"
_STATIC = {HTMX_FILE: _JS, LOGIN_SCRIPT: _JS}
_HTML = "text/html; charset=utf-8"
#: Scripts only from the console's own files (htmx and the sign-in script); inline styles stay
#: allowed (the pages' stylesheet is inline).
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
#: Sent with every console answer.
SECURITY_HEADERS = [
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
]


@dataclass(frozen=True)
class ConsoleResponse:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # below /console, e.g. /runs/abc
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: bytes

    def form(self) -> dict[str, str]:
        return dict(parse_qsl(self.body.decode("utf-8", "replace"), keep_blank_values=True))

    def cookie(self, name: str) -> str | None:
        for part in self.headers.get("cookie", "").split(";"):
            key, _, value = part.strip().partition("=")
            if key == name and value:
                return unquote(value)
        return None


def _html(status: int, text: str, headers: list[tuple[str, str]] | None = None) -> ConsoleResponse:
    base = [
        ("Content-Type", _HTML),
        ("Cache-Control", "no-store"),
        ("X-Frame-Options", "DENY"),
        ("Content-Security-Policy", CSP),
        *SECURITY_HEADERS,
    ]
    return ConsoleResponse(status, base + (headers or []), text.encode())


def _safe_location(location: str) -> bool:
    """A redirect target the console may send: a path of its own, no control character (a
    CR/LF would end the header and inject others), no scheme-relative ``//host``."""
    return (location.startswith(f"{BASE}/") or location == BASE) and not any(
        ord(c) < 0x20 or ord(c) == 0x7F for c in location
    )


def _redirect(
    location: str,
    *,
    notice: str = "",
    error: str = "",
    headers: list[tuple[str, str]] | None = None,
) -> ConsoleResponse:
    if not _safe_location(location):
        location = f"{BASE}/runs"
    params = {k: v for k, v in (("notice", notice), ("error", error)) if v}
    if params:
        location += ("&" if "?" in location else "?") + urlencode(params)
    return ConsoleResponse(303, [("Location", location), *SECURITY_HEADERS, *(headers or [])])


def _status_of(failure: ApiFailure) -> int:
    return failure.status if failure.status in (404, 409, 422, 429) else 502


class Console:
    """The web console of ``relayflow serve`` (see the module docstring); ``transport``
    reaches the control API (:mod:`relayflow.console.api`)."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        #: Session id (the cookie's value) → the API key it signed in with.
        self._sessions: dict[str, str] = {}
        self._sessions_lock = threading.Lock()
        self._routes: list[tuple[str, tuple[str, ...], Callable[..., ConsoleResponse]]] = [
            ("GET", ("workflows",), self._workflows),
            ("GET", ("workflows", "*"), self._workflow),
            ("POST", ("workflows", "*", "run"), self._start_run),
            ("GET", ("runs",), self._runs),
            ("GET", ("runs", "*"), self._run),
            ("GET", ("runs", "*", "live"), self._run_live),
            ("POST", ("runs", "*", "*"), self._run_action),
            ("GET", ("approvals",), self._approvals),
            ("POST", ("approvals", "*", "respond"), self._respond),
            ("GET", ("dlq",), self._dlq),
            ("POST", ("dlq", "*", "*"), self._dlq_action),
            ("GET", ("breakers",), self._breakers),
            ("POST", ("breakers", "*", "reset"), self._reset_breaker),
        ]

    def handle(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> ConsoleResponse:
        """Answer one request whose path starts with ``/console``."""
        split = urlsplit(target)
        path = split.path[len(BASE) :] or "/"
        request = Request(
            method=method.upper(),
            path=path,
            query=dict(parse_qsl(split.query, keep_blank_values=True)),
            headers={k.lower(): v for k, v in headers},
            body=body,
        )
        if request.method == "POST" and not _same_origin(request):
            return _html(403, page("Refused", flash("cross-site request refused"), signed_in=False))
        if path in ("/", ""):
            return _redirect(f"{BASE}/runs")
        if path.startswith("/static/"):
            return self._static(path.removeprefix("/static/"))
        if path == "/login":
            return self._login(request)
        if path == "/logout" and request.method == "POST":
            self._end_session(request.cookie(COOKIE))
            return _redirect(f"{BASE}/login", headers=[("Set-Cookie", _cookie(""))])
        key = self._session_key(request.cookie(COOKIE))
        if not key:
            return _redirect(f"{BASE}/login")
        api = ConsoleApi(self._transport, key)
        # Each segment as the user named it (a breaker id holds ':', sent as %3A): handlers
        # encode what they put in an API path themselves (segment()).
        parts = tuple(unquote(part) for part in path.strip("/").split("/") if part)
        for method_, pattern, handler in self._routes:
            if method_ == request.method and _matches(pattern, parts):
                try:
                    return handler(
                        api, request, *[p for p, q in zip(parts, pattern, strict=True) if q == "*"]
                    )
                except ApiFailure as failure:
                    return self._failed(request, failure)
        return _html(404, page("Not found", flash(f"no console page at {BASE}{path}")))

    # -- sign-in and files ----------------------------------------------------------------

    def _static(self, name: str) -> ConsoleResponse:
        if name not in _STATIC:
            return ConsoleResponse(
                404, [("Content-Type", "text/plain"), *SECURITY_HEADERS], b"not found"
            )
        data = resources.files("relayflow.console").joinpath("static", name).read_bytes()
        headers = [("Content-Type", _STATIC[name]), ("Cache-Control", "max-age=86400")]
        return ConsoleResponse(200, [*headers, *SECURITY_HEADERS], data)

    def _start_session(self, key: str) -> str:
        session = secrets.token_urlsafe(32)
        with self._sessions_lock:
            self._sessions[session] = key
        return session

    def _session_key(self, session: str | None) -> str | None:
        if not session:
            return None
        with self._sessions_lock:
            return self._sessions.get(session)

    def _end_session(self, session: str | None) -> None:
        if session:
            with self._sessions_lock:
                self._sessions.pop(session, None)

    def _login(self, request: Request) -> ConsoleResponse:
        message = ""
        if request.method == "POST":
            key = request.form().get("key", "").strip()
            try:
                ConsoleApi(self._transport, key).get("/workflows", limit=1)
            except ApiFailure as failure:
                message = (
                    "That API key was refused (missing, unknown or revoked)."
                    if failure.status in (401, 403)
                    else failure.message
                )
            else:
                self._end_session(request.cookie(COOKIE))
                session = self._start_session(key)
                return _redirect(f"{BASE}/runs", headers=[("Set-Cookie", _cookie(session))])
        body = (
            '<h1>Sign in</h1><div class="card"><form method="post" action="'
            f'{BASE}/login" id="login"><label for="key">API key</label>'
            '<input type="password" id="key" name="key" autocomplete="off" '
            'placeholder="rf_key_…"><p class="hint" id="from-link" hidden>This link carries '
            "an API key. Sign in only if you opened it from <code>relayflow serve</code>'s "
            "banner: the console will act as that key's tenant, and signing in replaces "
            'the current sign-in.</p><p class="hint">The console acts with this key\'s tenant, '
            "through the control API. <code>relayflow serve</code> prints a sign-in link; "
            "make more keys with <code>relayflow keys create</code>.</p>"
            '<button id="sign-in">Sign in</button></form></div>'
            # The serve banner's link carries the key in the fragment (never sent anywhere).
            f'<script src="{BASE}/static/{LOGIN_SCRIPT}"></script>'
        )
        return _html(
            401 if message else 200, page("Sign in", body, flash=flash(message), signed_in=False)
        )

    def _failed(self, request: Request, failure: ApiFailure) -> ConsoleResponse:
        if failure.status == 401:
            return _redirect(
                f"{BASE}/login", error="sign in again", headers=[("Set-Cookie", _cookie(""))]
            )
        text = f"{failure.message} ({failure.status} {failure.code})"
        return _html(_status_of(failure), page("Error", flash(text)))

    def _page(self, request: Request, title: str, body: str, active: str) -> ConsoleResponse:
        notices = flash(request.query.get("error", "")) + flash(
            request.query.get("notice", ""), "info"
        )
        return _html(200, page(title, body, active=active, flash=notices))

    # -- pages ----------------------------------------------------------------------------

    def _workflows(self, api: ConsoleApi, request: Request) -> ConsoleResponse:
        return self._page(request, "Workflows", workflows_page(api), "workflows")

    def _workflow(self, api: ConsoleApi, request: Request, workflow_id: str) -> ConsoleResponse:
        return self._page(request, workflow_id, workflow_page(api, workflow_id), "workflows")

    def _runs(self, api: ConsoleApi, request: Request) -> ConsoleResponse:
        body = runs_page(
            api,
            status=request.query.get("status", ""),
            workflow=request.query.get("workflow", ""),
            parked=request.query.get("parked") == "1",
        )
        return self._page(request, "Runs", body, "runs")

    def _run(self, api: ConsoleApi, request: Request, run_id: str) -> ConsoleResponse:
        return self._page(request, f"Run {run_id[:12]}", run_page(api, run_id), "runs")

    def _run_live(self, api: ConsoleApi, request: Request, run_id: str) -> ConsoleResponse:
        try:
            return _html(200, run_live(api, run_id))
        except ApiFailure as failure:
            if failure.status == 401:
                raise
            # A poll that failed (throttled, a blip) keeps the page and polls again.
            retry = (
                f'<div id="live" hx-get="{BASE}/runs/{segment(run_id)}/live" '
                'hx-trigger="every 2s" hx-swap="outerHTML">'
                + flash(f"could not refresh: {failure.message} ({failure.code})")
                + "</div>"
            )
            return _html(200, retry)

    def _approvals(self, api: ConsoleApi, request: Request) -> ConsoleResponse:
        return self._page(request, "Approvals", approvals_page(api), "approvals")

    def _dlq(self, api: ConsoleApi, request: Request) -> ConsoleResponse:
        return self._page(request, "DLQ", dlq_page(api), "dlq")

    def _breakers(self, api: ConsoleApi, request: Request) -> ConsoleResponse:
        return self._page(request, "Breakers", breakers_page(api), "breakers")

    # -- actions --------------------------------------------------------------------------

    def _start_run(self, api: ConsoleApi, request: Request, workflow_id: str) -> ConsoleResponse:
        form = request.form()
        workflow = api.get(f"/workflows/{segment(workflow_id)}")
        schema = (workflow.get("definition") or {}).get("input_schema")
        run_input, errors = parse_input(schema, form)
        if not errors:
            body = {
                "input": run_input,
                "dry_run": "dry_run" in form,
                "step_through": "step_through" in form,
            }
            try:
                started = api.post(f"/workflows/{segment(workflow_id)}/runs", body)
            except ApiFailure as failure:
                if failure.code != "invalid_input":
                    raise
                errors = _pointer_errors(failure)
            else:
                notice = "run started" if started.get("created", True) else "the same run"
                if started.get("admission"):
                    notice = f"run {started['admission']}"
                return _redirect(f"{BASE}/runs/{segment(started['run_id'])}", notice=notice)
        body_html = workflow_page(api, workflow_id, values=form, errors=errors)
        message = flash("The input does not match the workflow's input schema: see below.")
        return _html(422, page(workflow_id, body_html, active="workflows", flash=message))

    def _run_action(
        self, api: ConsoleApi, request: Request, run_id: str, action: str
    ) -> ConsoleResponse:
        form = request.form()
        back = f"{BASE}/runs/{segment(run_id)}"
        try:
            if action == "cancel":
                api.post(f"/runs/{segment(run_id)}/cancel")
                return _redirect(back, notice="run cancelled")
            if action == "continue":
                done = api.post(f"/runs/{segment(run_id)}/continue", {"to_end": "to_end" in form})
                released = done.get("released")
                return _redirect(back, notice=f"released {released}" if released else "running on")
            if action == "resume":
                return self._resume(api, run_id, form, back)
            if action == "rerun":
                started = api.post(
                    f"/runs/{segment(run_id)}/rerun",
                    {
                        "from_step": form.get("from_step", ""),
                        "version": form.get("version") or "pinned",
                    },
                )
                return _redirect(
                    f"{BASE}/runs/{segment(started['run_id'])}",
                    notice=f"rerun of {run_id[:12]} from {form.get('from_step')}",
                )
        except ApiFailure as failure:
            if failure.status == 401:
                raise
            return _redirect(back, error=f"{failure.message} ({failure.code})")
        return _html(404, page("Not found", flash(f"no run action {action!r}")))

    def _resume(
        self, api: ConsoleApi, run_id: str, form: Mapping[str, str], back: str
    ) -> ConsoleResponse:
        body: dict[str, Any] = {"action": form.get("action") or "retry"}
        for name in ("output", "context"):
            text = (form.get(name) or "").strip()
            if not text:
                continue
            try:
                body[name] = json.loads(text)
            except json.JSONDecodeError as exc:
                return _redirect(back, error=f"{name} is not JSON: {exc.msg}")
        api.post(f"/runs/{segment(run_id)}/resume", body)
        return _redirect(back, notice=f"resumed: {body['action']}")

    def _respond(self, api: ConsoleApi, request: Request, approval_id: str) -> ConsoleResponse:
        form = request.form()
        back = form.get("back") or f"{BASE}/approvals"
        if not _safe_location(back):
            back = f"{BASE}/approvals"
        body: dict[str, Any] = {"option": form.get("option", "")}
        if (form.get("data") or "").strip():
            try:
                body["data"] = json.loads(form["data"])
            except json.JSONDecodeError as exc:
                return _redirect(back, error=f"data is not JSON: {exc.msg}")
        try:
            api.post(f"/approvals/{segment(approval_id)}/respond", body)
        except ApiFailure as failure:
            if failure.status == 401:
                raise
            return _redirect(back, error=f"{failure.message} ({failure.code})")
        return _redirect(back, notice=f"decided: {body['option']}")

    def _dlq_action(
        self, api: ConsoleApi, request: Request, run_id: str, action: str
    ) -> ConsoleResponse:
        try:
            if action == "retry":
                api.post(f"/dlq/{segment(run_id)}/retry")
                return _redirect(f"{BASE}/runs/{segment(run_id)}", notice="retry started")
            if action == "discard":
                api.call("DELETE", f"/dlq/{segment(run_id)}")
                return _redirect(f"{BASE}/dlq", notice="entry discarded")
        except ApiFailure as failure:
            if failure.status == 401:
                raise
            return _redirect(f"{BASE}/dlq", error=f"{failure.message} ({failure.code})")
        return _html(404, page("Not found", flash(f"no DLQ action {action!r}")))

    def _reset_breaker(self, api: ConsoleApi, request: Request, breaker_id: str) -> ConsoleResponse:
        try:
            api.post(f"/breakers/{segment(breaker_id)}/reset")
        except ApiFailure as failure:
            if failure.status == 401:
                raise
            return _redirect(f"{BASE}/breakers", error=f"{failure.message} ({failure.code})")
        return _redirect(f"{BASE}/breakers", notice=f"{breaker_id} reset")


def _matches(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    return len(pattern) == len(parts) and all(
        p in ("*", q) for p, q in zip(pattern, parts, strict=True)
    )


def _same_origin(request: Request) -> bool:
    """No ``Origin`` (a same-origin form in an older browser), ``null`` from a page of the
    console itself (``Sec-Fetch-Site: same-origin``), or exactly the console's own: the scheme
    it is served over (``X-Forwarded-Proto`` behind a proxy, else http) and its host."""
    origin = request.headers.get("origin")
    if origin == "null":
        # Under Referrer-Policy: no-referrer a browser sends its own form POSTs with
        # "Origin: null"; its Sec-Fetch-Site (which no page can set) says whose form it was.
        return request.headers.get("sec-fetch-site") == "same-origin"
    if not origin:
        return True
    scheme = request.headers.get("x-forwarded-proto", "http").split(",")[0].strip().lower()
    split = urlsplit(origin)
    return split.scheme == scheme and split.netloc == request.headers.get("host", "")


def _cookie(session: str) -> str:
    flags = f"Path={BASE}; HttpOnly; SameSite=Strict"
    if not session:
        return f"{COOKIE}=; {flags}; Max-Age=0"
    return f"{COOKIE}={quote(session, safe='')}; {flags}"


def _pointer_errors(failure: ApiFailure) -> dict[str, str]:
    """``invalid_input`` details by the form field they name (``/a/b`` → ``/a``)."""
    errors: dict[str, str] = {}
    for item in failure.details or []:
        if isinstance(item, Mapping):
            pointer = str(item.get("pointer") or "")
            field_pointer = "/" + pointer.split("/")[1] if pointer else ""
            errors.setdefault(field_pointer, str(item.get("message") or ""))
    return errors or {"": failure.message}
