"""``relayflow serve``: the control API on this machine, backed by the local runtime.

One process plays every part of the deployed stack:

* a :class:`~relayflow.local.runtime.LocalRuntime` (moto and the local Lambda endpoint), with
  the Relayflow table (the schema ``template.yaml`` declares) and the event bus;
* API Gateway: each HTTP request becomes a REST (v1) proxy event; for every route but the
  public ones (``/openapi.json``, ``/swagger``) the authorizer function's handler runs first,
  and its ``context.tenant`` goes into ``requestContext.authorizer``; then ``functions/api``'s
  handler answers. A refused key is a 401, a per-key token bucket answers 429 with
  ``Retry-After`` (API Gateway's throttling, locally). ``POST /hooks/{slug}`` is public: it
  goes straight to ``functions/webhook``'s handler; ``GET``/``POST /guest/approvals/{id}`` (the
  guest approval page, signed links) reach ``functions/api`` without the authorizer, and
  guest links point at this server's URL unless ``RELAYFLOW_PUBLIC_BASE_URL`` is set;
* EventBridge's delivery to Lambda targets: ``server.events``, a ``LocalEventRouter``
  (:mod:`relayflow.local.eventbridge`), hands every event put on the bus (``POST /events``)
  to the trigger function of each subscription rule that matches it;
* EventBridge's "Step Functions Execution Status Change" rule: :class:`StatusRecorder` watches
  the runtime's executions and, when one starts (RUNNING) and when it ends, builds that event
  and calls ``functions/recorder``'s handler, as the rule would;
* the keys admin: ``POST /admin/keys {tenant, name}``, ``GET /admin/keys?tenant=T`` and
  ``DELETE /admin/keys/{key_id}``, guarded by the ``X-Admin-Token`` printed on start (what
  ``relayflow keys`` calls for a local server; deployed, it writes to DynamoDB directly).

The HTTP server and throttling are :mod:`relayflow.local.serve_http`, the status recorder
:mod:`relayflow.local.serve_recorder`.

Tests use :class:`LocalServer` (port 0, in a thread)::

    with LocalServer() as server:
        httpx.get(f"{server.url}/workflows", headers={"X-Api-Key": server.bootstrap_key})
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import math
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qsl, unquote, urlsplit

from relayflow.local.eventbridge import LocalEventRouter
from relayflow.local.lambda_endpoint import Handler, HandlerRegistry, LambdaContext
from relayflow.local.lifecycle import ClosedOnExit
from relayflow.local.runtime import LocalRuntime
from relayflow.local.serve_http import (
    DEFAULT_RATE_BURST,
    DEFAULT_RATE_PER_SECOND,
    LocalHTTPServer,
    LocalResponse,
    RateLimiter,
    RequestHandler,
    error_response,
    from_proxy_result,
    json_response,
)
from relayflow.local.serve_recorder import StatusRecorder
from relayflow.local.serve_state import DEFAULT_SAVE_INTERVAL, KeptState
from relayflow.local.timescale import DEFAULT_TIME_SCALE
from relayflow.naming import function_arn, function_name

__all__ = ["API_ID", "LOCAL_TENANT", "PROXY_RESOURCE", "WEBHOOK_RESOURCE", "LocalServer"]

#: The tenant of the key printed on start.
LOCAL_TENANT = "local"
API_ID = "local"
#: The resource every authorized route comes through (template.yaml: ``/{proxy+}`` ANY).
PROXY_RESOURCE = "/{proxy+}"
#: The public webhook route (template.yaml: ``POST /hooks/{slug}``, no authorizer).
WEBHOOK_RESOURCE = "/hooks/{slug}"


#: What ``GET /`` says of a server without ``--state``.
IN_MEMORY = "in memory: workflows, runs, API keys and waits are lost when the server stops"


def index(state: str = IN_MEMORY) -> dict[str, Any]:
    """``GET /`` (public): what this server is and where its parts are."""
    return {
        "service": "relayflow serve",
        "console": "/console",
        "openapi": "/openapi.json",
        "swagger": "/swagger",
        "state": state,
    }


def _resource(path: str) -> tuple[str, dict[str, str] | None]:
    """The API Gateway resource of a path, and its path parameters, as ``template.yaml``
    declares them: the public routes by name, everything else through ``/{proxy+}``."""
    from relayflow.api.precheck import PUBLIC_RESOURCES

    if path in PUBLIC_RESOURCES:
        return path, None
    parts = path.strip("/").split("/")
    if len(parts) == 2 and parts[0] == "hooks" and parts[1]:
        return WEBHOOK_RESOURCE, {"slug": parts[1]}
    if len(parts) == 3 and parts[:2] == ["guest", "approvals"] and parts[2]:
        from relayflow.api.precheck import GUEST_APPROVAL_RESOURCE

        return GUEST_APPROVAL_RESOURCE, {"id": parts[2]}
    return PROXY_RESOURCE, ({"proxy": path.lstrip("/")} if path.strip("/") else None)


#: The logger moto's interpreter reports every failed state on, with the whole state's repr
#: (10–20 KB a line): a failure the run's history and the recorder's log line already tell.
INTERPRETER_LOGGER = "moto.stepfunctions.parser.asl.component.eval_component"


class StateFailuresFilter(logging.Filter):
    """Drops the interpreter's report of a state failure (a ``FailureEventException``, which
    the run's history holds); its reports of anything else (a fault in moto) still pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        first = str(args[0]) if args else ""
        return not first.startswith("Exception=FailureEventException")


class LocalServer(ClosedOnExit):
    """The control API over HTTP on ``host:port`` (0: any free port), backed by a local runtime
    opened on enter; a context manager. ``url``, ``bootstrap_key`` (an API key of tenant
    ``local``) and ``admin_token`` are set once entered."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        time_scale: float = DEFAULT_TIME_SCALE,
        rate_per_second: float = DEFAULT_RATE_PER_SECOND,
        rate_burst: int = DEFAULT_RATE_BURST,
        admin_token: str | None = None,
        functions_dir: Path | None = None,
        access_log: TextIO | None = None,
        maintenance_interval: float | None = None,
        state_dir: Path | str | None = None,
        save_interval: float | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.time_scale = time_scale
        self.rate_limiter = RateLimiter(rate_per_second, rate_burst)
        self.admin_token = admin_token or secrets.token_urlsafe(24)
        self._admin_token_given = admin_token is not None
        #: ``--state DIR``: what the server keeps across a restart (``None``: nothing).
        self.state: KeptState | None = None
        if state_dir is not None:
            interval = DEFAULT_SAVE_INTERVAL if save_interval is None else save_interval
            self.state = KeptState(state_dir, interval=interval)
        self.bootstrap_key = ""
        self.url = ""
        self.runtime: LocalRuntime | None = None
        self.recorder: StatusRecorder | None = None
        #: Delivers events put on the bus to the trigger function (event subscriptions).
        self.events: LocalEventRouter | None = None
        self._functions_dir = functions_dir
        self._access_log = access_log
        self._access_log_lock = threading.Lock()
        self._api: Handler | None = None
        self._authorizer: Handler | None = None
        self._webhook: Handler | None = None
        self._httpd: LocalHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._settings_override: AbstractContextManager[Any] | None = None
        #: Seconds between calls of the maintenance function (DLQ auto-retries), as its
        #: schedule does on AWS; ``None``: only on ``POST /admin/maintenance``.
        self.maintenance_interval = maintenance_interval
        self._maintenance: Handler | None = None
        self._maintenance_stop = threading.Event()
        self._maintenance_thread: threading.Thread | None = None
        self._console: Any = None
        self._quiet = StateFailuresFilter()

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> LocalServer:
        logging.getLogger(INTERPRETER_LOGGER).addFilter(self._quiet)
        self.runtime = LocalRuntime(time_scale=self.time_scale, functions_dir=self._functions_dir)
        self.runtime.__enter__()
        return self.opened_by(self._open)

    def _open(self) -> None:
        assert self.runtime is not None
        from relayflow.dal.schema import create_table
        from relayflow.local.step_logs import with_step_events
        from relayflow.settings import get_settings, override_settings

        _forget_cached_services()
        settings = get_settings()
        create_table(self.runtime.dynamodb_client, settings.table_name)
        events = self.runtime.events_client
        buses = {bus["Name"] for bus in events.list_event_buses().get("EventBuses", [])}
        if settings.event_bus_name not in buses:
            events.create_event_bus(Name=settings.event_bus_name)
        if self.state is not None:
            self.state.restore(self.runtime)
        self.events = LocalEventRouter(self.runtime)
        self.events.open()

        registry = HandlerRegistry({}, self.runtime.functions_dir, region=self.runtime.region)
        self._api = _required(registry, "api")
        self._authorizer = _required(registry, "authorizer")
        self._webhook = _required(registry, "webhook")
        recorder = _required(registry, "recorder")
        self._maintenance = _required(registry, "maintenance")

        kept = self.state.saved_server if self.state is not None else {}
        secret = str(kept.get("bootstrap_key") or "")
        if secret and self.control().authenticate(secret) == LOCAL_TENANT:
            self.bootstrap_key = secret  # the key printed last time still works (it was kept)
        else:  # none yet, or it was revoked before the restart: a new one
            self.bootstrap_key = self.control().create_api_key(LOCAL_TENANT, "bootstrap").secret
        if kept.get("admin_token") and not self._admin_token_given:
            self.admin_token = str(kept["admin_token"])
        self.recorder = StatusRecorder(self.runtime, with_step_events(self.runtime, recorder))
        self.recorder.start()

        self._httpd = LocalHTTPServer((self.host, self.port), RequestHandler)
        self._httpd.app = self
        host, port = self._httpd.server_address[:2]
        self.port = int(port)
        self.url = f"http://{host}:{self.port}"
        if not settings.public_base_url:  # guest approval links point at this server
            self._settings_override = override_settings(public_base_url=self.url)
            self._settings_override.__enter__()
        if self.state is not None:
            # Runs under way go back to their waits before a request is answered (the
            # socket is bound: requests wait in its queue), with links to this server.
            self.state.revive(self.runtime, self.recorder.report)
            self.state.start(self.runtime, self._kept_facts)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="relayflow-serve", daemon=True
        )
        self._thread.start()
        if self.maintenance_interval:
            self._maintenance_stop.clear()
            self._maintenance_thread = threading.Thread(
                target=self._maintain, name="relayflow-maintenance", daemon=True
            )
            self._maintenance_thread.start()

    def _kept_facts(self) -> dict[str, Any]:
        """What ``--state`` keeps of the server itself."""
        return {"bootstrap_key": self.bootstrap_key, "admin_token": self.admin_token}

    def state_description(self) -> str:
        """Where this server's state lives (``GET /``, the banner)."""
        return self.state.describe() if self.state is not None else IN_MEMORY

    def run_maintenance(self) -> dict[str, Any]:
        """Call the maintenance function once (what its one-minute schedule does on AWS)."""
        assert self._maintenance is not None and self.runtime is not None
        context = LambdaContext(
            function_name=function_name("maintenance"),
            invoked_function_arn=function_arn("maintenance", self.runtime.region),
        )
        result: dict[str, Any] = self._maintenance({}, context)
        if self.recorder is not None and result.get("started"):
            self.recorder.poke()
        return result

    def fire_due_deadlines(self, now: float | None = None) -> int:
        """Fire the run admission deadlines (debounce, batch) due at ``now`` (default: the
        admission clock), as EventBridge Scheduler would (``relayflow.local.deadlines``)."""
        from relayflow.local.deadlines import fire_due_deadlines

        assert self.runtime is not None and self.events is not None
        moment = self.control().admission.clock() if now is None else now
        fired = fire_due_deadlines(self.events, self.runtime.client("scheduler"), moment)
        if fired and self.recorder is not None:
            self.recorder.poke()
        return fired

    def _maintain(self) -> None:
        assert self.maintenance_interval
        while not self._maintenance_stop.wait(self.maintenance_interval):
            try:
                self.fire_due_deadlines()
                self.run_maintenance()
            except Exception as exc:  # the schedule fires again next interval
                from relayflow.observability import logger

                logger.warning("maintenance failed", extra={"reason": str(exc)})

    def close(self) -> None:
        """Stop serving and close every part (what leaving the ``with`` block does)."""
        if self._httpd is not None:
            if self._thread is not None:  # shutdown() waits for serve_forever to notice
                self._httpd.shutdown()
                self._thread.join(timeout=5)
                self._thread = None
            self._httpd.server_close()
            self._httpd = None
        if self._maintenance_thread is not None:
            self._maintenance_stop.set()
            self._maintenance_thread.join(timeout=5)
            self._maintenance_thread = None
        if self.state is not None:
            self.state.stop()
        if self.recorder is not None:
            if self.state is not None:  # the last save has every run end recorded
                self.recorder.settle()
            self.recorder.stop()
            self.recorder = None
        if self.state is not None and self.runtime is not None:
            self.state.save()
        if self.events is not None:
            self.events.close()
            self.events = None
        if self.runtime is not None:
            self.runtime.close()
            self.runtime = None
        if self._settings_override is not None:
            self._settings_override.__exit__(None, None, None)
            self._settings_override = None
        _forget_cached_services()
        logging.getLogger(INTERPRETER_LOGGER).removeFilter(self._quiet)

    def control(self) -> Any:
        """The ControlPlane the API function uses (same DAL, same moto)."""
        from relayflow.control.service import get_control_plane

        return get_control_plane()

    def set_rate_limit(self, per_second: float, burst: int) -> None:
        self.rate_limiter.configure(per_second, burst)

    def settle(self, timeout: float = 5.0) -> None:
        """Wait until every event put so far has been delivered and the recorder has
        reported every status change so far."""
        if self.events is not None:
            self.events.settle(timeout)
        if self.recorder is not None:
            self.recorder.settle(timeout)

    # -- requests ----------------------------------------------------------------------------

    def dispatch(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes,
        client_ip: str = "127.0.0.1",
    ) -> LocalResponse:
        """Answer one request the way API Gateway and the functions behind it would."""
        split = urlsplit(target)
        path = unquote(split.path) or "/"
        if path == "/console" or path.startswith("/console/"):
            return self._console_request(method, target, headers, body)
        if path == "/" and method in ("GET", "HEAD"):
            return json_response(200, index(self.state_description()))
        if path.startswith("/admin/") or path == "/admin":
            return self._admin(method, path, split.query, headers, body)
        event = self._proxy_event(method, path, split.query, headers, body, client_ip)
        if event["resource"] == WEBHOOK_RESOURCE:
            return self._deliver_webhook(event)
        public = event["resource"] != PROXY_RESOURCE
        if not public:
            refused = self._authorize(event)
            if refused is not None:
                return refused
        assert self._api is not None
        context = LambdaContext(
            function_name=function_name("api"), invoked_function_arn=function_arn("api")
        )
        # Concurrent requests run side by side, as API Gateway would hand them to several
        # execution environments (the resolver keeps each request's state per thread).
        result = self._api(event, context)
        if method != "GET" and self.recorder is not None:
            self.recorder.poke()
        return from_proxy_result(result)

    def _console_request(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> LocalResponse:
        """``/console``: the web console (:mod:`relayflow.console`), which calls this server's
        API as any client would (authorizer, rate limit, API function), in process."""
        if self._console is None:
            from relayflow.console import Console

            def transport(
                verb: str, path: str, api_headers: list[tuple[str, str]], data: bytes
            ) -> tuple[int, bytes]:
                answer = self.dispatch(verb, path, api_headers, data)
                return answer.status, answer.body

            self._console = Console(transport)
        answer = self._console.handle(method, target, headers, body)
        return LocalResponse(answer.status, answer.headers, answer.body)

    def _deliver_webhook(self, event: dict[str, Any]) -> LocalResponse:
        """``POST /hooks/{slug}``: no authorizer, no API-key limit (the webhook function keeps
        its own per-endpoint limit); concurrent deliveries run side by side, as Lambda's
        instances would (a sync response may wait for its run)."""
        assert self._webhook is not None
        context = LambdaContext(
            function_name=function_name("webhook"), invoked_function_arn=function_arn("webhook")
        )
        result = self._webhook(event, context)
        if self.recorder is not None:
            self.recorder.poke()
        return from_proxy_result(result)

    def _authorize(self, event: dict[str, Any]) -> LocalResponse | None:
        from relayflow.api.auth import Unauthorized, extract_secret

        secret = extract_secret(event["headers"])
        if secret is not None:
            wait = self.rate_limiter.acquire(hashlib.sha256(secret.encode()).hexdigest())
            if wait is not None:
                return error_response(
                    429,
                    "too_many_requests",
                    "too many requests for this API key",
                    {"Retry-After": str(max(1, math.ceil(wait)))},
                )
        assert self._authorizer is not None
        request = {
            "type": "REQUEST",
            "methodArn": self._method_arn(event),
            **{k: event[k] for k in _AUTHORIZER_FIELDS},
        }
        context = LambdaContext(
            function_name=function_name("authorizer"),
            invoked_function_arn=function_arn("authorizer"),
        )
        try:
            answer = self._authorizer(request, context)
        except Unauthorized:
            return error_response(401, "unauthorized", "missing or invalid API key")
        if not _allows(answer):
            return error_response(403, "forbidden", "the authorizer denied this request")
        event["requestContext"]["authorizer"] = {
            "principalId": answer.get("principalId"),
            **(answer.get("context") or {}),
        }
        return None

    def _method_arn(self, event: Mapping[str, Any]) -> str:
        assert self.runtime is not None
        stage = event["requestContext"]["stage"]
        return (
            f"arn:aws:execute-api:{self.runtime.region}:{self.runtime.account}:{API_ID}/"
            f"{stage}/{event['httpMethod']}{event['path']}"
        )

    def _proxy_event(
        self,
        method: str,
        path: str,
        query: str,
        headers: list[tuple[str, str]],
        body: bytes,
        client_ip: str,
    ) -> dict[str, Any]:
        """An API Gateway REST (v1) proxy event, as the API function receives it."""
        from relayflow.settings import get_settings

        resource, path_parameters = _resource(path)
        single_headers: dict[str, str] = {}
        multi_headers: dict[str, list[str]] = {}
        for name, value in headers:
            single_headers[name] = value
            multi_headers.setdefault(name, []).append(value)
        single_query: dict[str, str] = {}
        multi_query: dict[str, list[str]] = {}
        for name, value in parse_qsl(query, keep_blank_values=True):
            single_query[name] = value
            multi_query.setdefault(name, []).append(value)
        text: str | None = None
        encoded = False
        if body:
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError:
                text, encoded = base64.b64encode(body).decode("ascii"), True
        stage = get_settings().stage
        now = time.time()
        return {
            "resource": resource,
            "path": path,
            "httpMethod": method,
            "headers": single_headers or None,
            "multiValueHeaders": multi_headers or None,
            "queryStringParameters": single_query or None,
            "multiValueQueryStringParameters": multi_query or None,
            "pathParameters": path_parameters,
            "stageVariables": None,
            "requestContext": {
                "accountId": self.runtime.account if self.runtime else "",
                "apiId": API_ID,
                "resourceId": API_ID,
                "resourcePath": resource,
                "httpMethod": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "stage": stage,
                "requestId": str(uuid.uuid4()),
                "extendedRequestId": str(uuid.uuid4()),
                "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
                "requestTimeEpoch": int(now * 1000),
                "identity": {
                    "sourceIp": client_ip,
                    "userAgent": single_headers.get("User-Agent")
                    or single_headers.get("user-agent"),
                },
                "authorizer": None,
            },
            "body": text,
            "isBase64Encoded": encoded,
        }

    # -- admin ---------------------------------------------------------------------------------

    def _admin(
        self,
        method: str,
        path: str,
        query: str,
        headers: list[tuple[str, str]],
        body: bytes,
    ) -> LocalResponse:
        token = next((v for k, v in headers if k.lower() == "x-admin-token"), "")
        if not hmac.compare_digest(token.encode(), self.admin_token.encode()):
            return error_response(401, "unauthorized", "send the admin token in X-Admin-Token")
        from relayflow.control.errors import ApiError

        try:
            return self._admin_route(method, path, query, body)
        except ApiError as exc:
            return json_response(exc.status, exc.to_dict())

    def _admin_route(self, method: str, path: str, query: str, body: bytes) -> LocalResponse:
        from relayflow.control.errors import BadRequest, Unprocessable
        from relayflow.control.limits import TENANT_PATTERN

        control = self.control()
        parts = path.strip("/").split("/")
        if parts == ["admin", "keys"] and method == "POST":
            try:
                request = json.loads(body or b"{}")
            except ValueError as exc:
                raise BadRequest("the body is not valid JSON") from exc
            tenant = request.get("tenant") if isinstance(request, dict) else None
            name = request.get("name") if isinstance(request, dict) else None
            if not isinstance(tenant, str) or not TENANT_PATTERN.match(tenant):
                raise Unprocessable("tenant must match ^[a-z0-9][a-z0-9-]{1,30}$")
            if not isinstance(name, str) or not name.strip() or len(name) > 128:
                raise Unprocessable("name must be a non-empty string of at most 128 characters")
            created = control.create_api_key(tenant, name.strip())
            return json_response(201, created.model_dump(mode="json"))
        if parts == ["admin", "keys"] and method == "GET":
            tenant = dict(parse_qsl(query)).get("tenant", "")
            if not TENANT_PATTERN.match(tenant):
                raise Unprocessable("pass ?tenant=<tenant id>")
            keys = control.list_api_keys(tenant)
            return json_response(200, {"items": [k.model_dump(mode="json") for k in keys]})
        if parts == ["admin", "maintenance"] and method == "POST":
            return json_response(200, self.run_maintenance())
        if len(parts) == 3 and parts[:2] == ["admin", "keys"] and method == "DELETE":
            revoked = control.revoke_api_key(parts[2])
            return json_response(200, revoked.model_dump(mode="json"))
        return error_response(404, "not_found", "no such admin route")

    # -- running -------------------------------------------------------------------------------

    def log_request(self, method: str, target: str, status: int, started: float) -> None:
        """One access-log line; the signature of a guest link and any other credential in
        the query string are masked (:func:`relayflow.observability.redact_text`)."""
        if self._access_log is not None:
            from relayflow.observability import redact_text

            ms = (time.perf_counter() - started) * 1000
            line = f"{method} {redact_text(target)} {status} {ms:.0f} ms"
            with self._access_log_lock:
                print(line, file=self._access_log, flush=True)


_AUTHORIZER_FIELDS = (
    "resource",
    "path",
    "httpMethod",
    "headers",
    "multiValueHeaders",
    "queryStringParameters",
    "multiValueQueryStringParameters",
    "pathParameters",
    "stageVariables",
    "requestContext",
)


def _allows(answer: Any) -> bool:
    statements = ((answer or {}).get("policyDocument") or {}).get("Statement") or []
    effects = {s.get("Effect") for s in statements if isinstance(s, dict)}
    return "Allow" in effects and "Deny" not in effects


def _required(registry: HandlerRegistry, kind: str) -> Handler:
    handler = registry.resolve(function_name(kind))
    if handler is None:
        raise RuntimeError(f"functions/{kind}/app.py has no handler")
    return handler


def _forget_cached_services() -> None:
    """Drop the control plane and DAL built for an earlier runtime (their clients)."""
    from relayflow.control import service
    from relayflow.dal import table

    for factory in (getattr(service, "get_control_plane", None), getattr(table, "get_dal", None)):
        cache_clear: Callable[[], None] | None = getattr(factory, "cache_clear", None)
        if cache_clear is not None:
            cache_clear()
