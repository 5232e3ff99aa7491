"""An in-process Lambda Invoke endpoint that serves Task states from Python handlers.

moto's Step Functions interpreter calls ``lambda:Invoke`` through boto3. The local runtime points
that client at this server (``AWS_ENDPOINT_URL_LAMBDA`` and an explicit ``endpoint_url``), which
answers ``POST /2015-03-31/functions/{FunctionName}/invocations`` the way AWS Lambda does:

* the function name arrives URL-encoded and may be a name, a full or partial ARN, ``name:alias``
  or carry ``?Qualifier=``; all of them resolve to the bare function name;
* a handler that returns is a 200 with the JSON result;
* a handler that raises is a 200 with ``X-Amz-Function-Error: Unhandled`` and the body the
  Python runtime sends (``errorMessage``, ``errorType`` = the exception class ``__name__``,
  ``stackTrace``), so ``Relayflow.*`` errors match ``ErrorEquals`` exactly as on AWS;
* an unknown function is a 404 ``ResourceNotFoundException``;
* ``GET /2017-03-31/tags/{ARN}`` (``ListTags``) answers the function's tags, which a tool
  call's tenant check reads (:mod:`relayflow.tools.tenant_data`).

``sam local start-lambda`` answers the same API, so the runtime can also be pointed at it.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from relayflow.local.httpd import QuietHandler, ThreadedServer
from relayflow.naming import LOCAL_ACCOUNT, LOCAL_REGION, kind_from_function

Handler = Callable[[Any, Any], Any]

_INVOKE_PREFIX = "/2015-03-31/functions/"
_INVOKE_SUFFIX = "/invocations"
_TAGS_PREFIX = "/2017-03-31/tags/"
#: What a local handler sees as its configured timeout (Lambda's maximum).
_DEFAULT_TIMEOUT_MS = 900_000


@dataclass(frozen=True)
class Invocation:
    """One Invoke the endpoint served."""

    function_name: str
    qualifier: str | None
    kind: str | None
    payload: Any
    result: Any = None
    error_type: str | None = None
    error_message: str | None = None
    status_code: int = 200
    request_id: str = ""
    started_at: float = 0.0
    ended_at: float = 0.0
    thread: str = ""

    @property
    def duration_ms(self) -> float:
        return (self.ended_at - self.started_at) * 1000.0

    @property
    def failed(self) -> bool:
        return self.error_type is not None


@dataclass
class LambdaContext:
    """The subset of the Lambda context object that handlers and Powertools read."""

    function_name: str
    invoked_function_arn: str
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 128
    log_group_name: str = ""
    log_stream_name: str = "local"
    timeout_ms: int = _DEFAULT_TIMEOUT_MS
    _started: float = field(default_factory=time.monotonic, repr=False)

    def __post_init__(self) -> None:
        if not self.log_group_name:
            self.log_group_name = f"/aws/lambda/{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        elapsed_ms = (time.monotonic() - self._started) * 1000.0
        return max(0, int(self.timeout_ms - elapsed_ms))


def parse_function_ref(raw: str, qualifier: str | None = None) -> tuple[str, str | None]:
    """Split an Invoke ``FunctionName`` (URL-decoded here) into ``(name, qualifier)``.

    Accepts ``name``, ``name:qualifier``, ``arn:aws:lambda:region:account:function:name[:q]``
    and the partial ARN ``account:function:name[:q]``. A ``Qualifier`` parameter wins over a
    qualifier in the name, as Lambda requires them to agree anyway.
    """
    ref = unquote(raw)
    parts = ref.split(":")
    if ref.startswith("arn:") and len(parts) >= 7:
        name, rest = parts[6], parts[7:]
    elif len(parts) >= 3 and parts[1] == "function":
        name, rest = parts[2], parts[3:]
    else:
        name, rest = parts[0], parts[1:]
    embedded = rest[0] if rest and rest[0] else None
    return name, qualifier or embedded


class HandlerRegistry:
    """Finds the Python handler for a function name.

    Explicit ``handlers`` (by function name) win; the mapping is read at each Invoke, so
    handlers added to it later are served too. Otherwise a Relayflow function name
    (``relayflow-<kind>``) loads ``<functions_dir>/<kind>/app.py`` once, by file path, and
    calls its ``handler``.
    """

    def __init__(
        self,
        handlers: Mapping[str, Handler] | None,
        functions_dir: Path,
        *,
        region: str = LOCAL_REGION,
        account: str = LOCAL_ACCOUNT,
        tags: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self._handlers: Mapping[str, Handler] = handlers if handlers is not None else {}
        #: Each function's tags by name; read at each ListTags, like the handlers.
        self.tags: Mapping[str, Mapping[str, str]] = tags if tags is not None else {}
        self._functions_dir = functions_dir
        self.region = region
        self.account = account
        self._modules: dict[str, ModuleType] = {}
        self._lock = threading.Lock()

    def function_arn(self, name: str) -> str:
        return f"arn:aws:lambda:{self.region}:{self.account}:function:{name}"

    def resolve(self, name: str) -> Handler | None:
        handler = self._handlers.get(name)
        if handler is not None:
            return handler
        kind = kind_from_function(name)
        if kind is None:
            return None
        module = self._load(kind)
        return getattr(module, "handler", None) if module is not None else None

    def _load(self, kind: str) -> ModuleType | None:
        with self._lock:
            if kind in self._modules:
                return self._modules[kind]
            path = self._functions_dir / kind / "app.py"
            if not path.is_file():
                return None
            safe = "".join(c if c.isalnum() else "_" for c in kind)
            module_name = f"relayflow_local_function_{safe}"
            spec = importlib.util.spec_from_file_location(module_name, path)
            if spec is None or spec.loader is None:
                return None
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(module_name, None)
                raise
            self._modules[kind] = module
            return module


def error_body(exc: BaseException) -> dict[str, Any]:
    """The body the AWS Lambda Python runtime returns for an unhandled exception.

    Like the runtime, the stack trace starts at the handler: this module's frames are dropped.
    """
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != __file__]
    stack = traceback.format_list(frames)
    return {"errorMessage": str(exc), "errorType": type(exc).__name__, "stackTrace": stack}


class _Server(ThreadedServer):
    request_queue_size = 256
    endpoint: LambdaEndpoint


class _InvokeHandler(QuietHandler):
    disable_nagle_algorithm = True
    server: _Server

    def do_POST(self) -> None:
        self.server.endpoint.handle_invoke(self)

    def do_GET(self) -> None:
        self.server.endpoint.handle_list_tags(self)

    def send_json(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


class LambdaEndpoint:
    """A ThreadingHTTPServer on 127.0.0.1 that implements the Lambda Invoke API."""

    def __init__(
        self,
        registry: HandlerRegistry,
        on_invocation: Callable[[Invocation], None] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.registry = registry
        self._on_invocation = on_invocation
        self._host = host
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        #: At-least-once simulation (Express): every Invoke runs its handler twice with the
        #: same payload, one after the other, and answers with the second result.
        self.duplicate_invocations = False

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the Lambda endpoint is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> None:
        server = _Server((self._host, 0), _InvokeHandler)
        server.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        server.endpoint = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="relayflow-lambda-endpoint",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def handle_invoke(self, request: _InvokeHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        raw_body = request.rfile.read(length) if length else b""
        split = urlsplit(request.path)
        path = split.path
        if not (path.startswith(_INVOKE_PREFIX) and path.endswith(_INVOKE_SUFFIX)):
            request.send_json(
                404,
                {"Type": "User", "message": f"Unknown operation {request.command} {path}"},
                {"x-amzn-ErrorType": "UnknownOperationException"},
            )
            return
        qualifier = (parse_qs(split.query).get("Qualifier") or [None])[0]
        name, qualifier = parse_function_ref(
            path[len(_INVOKE_PREFIX) : -len(_INVOKE_SUFFIX)], qualifier
        )
        try:
            handler = self.registry.resolve(name)
        except Exception as exc:  # the function's module failed to import
            self._respond_error(request, name, qualifier, None, exc, "Runtime.ImportModuleError")
            return
        if handler is None:
            self._function_not_found(request, name)
            return
        try:
            payload = json.loads(raw_body) if raw_body.strip() else {}
        except ValueError as exc:
            request.send_json(
                400,
                {"Type": "User", "message": f"Could not parse request body into json: {exc}"},
                {"x-amzn-ErrorType": "InvalidRequestContentException"},
            )
            return
        invocation_type = request.headers.get("X-Amz-Invocation-Type", "RequestResponse")
        if invocation_type == "DryRun":
            request.send_json(204, b"")
            return
        if invocation_type == "Event":
            threading.Thread(
                target=self._invoke,
                args=(handler, name, qualifier, payload),
                daemon=True,
            ).start()
            request.send_json(202, b"")
            return
        status, body, headers = self._invoke(handler, name, qualifier, payload)
        request.send_json(status, body, headers)

    def _function_not_found(self, request: _InvokeHandler, name: str) -> None:
        """Lambda's answer for a function that does not exist."""
        arn = self.registry.function_arn(name)
        request.send_json(
            404,
            {"Type": "User", "message": f"Function not found: {arn}"},
            {"x-amzn-ErrorType": "ResourceNotFoundException"},
        )

    def handle_list_tags(self, request: _InvokeHandler) -> None:
        """``ListTags``: the tags of a function the registry serves (404 for any other)."""
        path = urlsplit(request.path).path
        if not path.startswith(_TAGS_PREFIX):
            request.send_json(
                404,
                {"Type": "User", "message": f"Unknown operation {request.command} {path}"},
                {"x-amzn-ErrorType": "UnknownOperationException"},
            )
            return
        name, _ = parse_function_ref(path[len(_TAGS_PREFIX) :])
        try:
            handler = self.registry.resolve(name)
        except Exception:  # the function's module failed to import: it still exists
            handler = None
        tags = self.registry.tags.get(name)
        if handler is None and tags is None:
            self._function_not_found(request, name)
            return
        request.send_json(200, {"Tags": dict(tags or {})})

    def _invoke(
        self, handler: Handler, name: str, qualifier: str | None, payload: Any
    ) -> tuple[int, bytes, dict[str, str]]:
        if self.duplicate_invocations:
            # The duplicate sees the payload as sent: a handler may not change it in place.
            self._invoke_once(handler, name, qualifier, json.loads(json.dumps(payload)))
        return self._invoke_once(handler, name, qualifier, payload)

    def _invoke_once(
        self, handler: Handler, name: str, qualifier: str | None, payload: Any
    ) -> tuple[int, bytes, dict[str, str]]:
        arn = self.registry.function_arn(name)
        context = LambdaContext(
            function_name=name,
            invoked_function_arn=f"{arn}:{qualifier}" if qualifier else arn,
        )
        headers = {"X-Amz-Executed-Version": "$LATEST"}
        started = time.time()
        result: Any = None
        error: dict[str, Any] | None = None
        body = b"null"
        try:
            result = handler(payload, context)
        except Exception as exc:
            error = error_body(exc)
        else:
            try:
                body = json.dumps(result).encode("utf-8")
            except (TypeError, ValueError) as exc:
                # What the Python runtime reports for a result it cannot serialise.
                error = {
                    "errorMessage": f"Unable to marshal response: {exc}",
                    "errorType": "Runtime.MarshalError",
                    "stackTrace": [],
                }
        if error is not None:
            body = json.dumps(error).encode("utf-8")
            headers["X-Amz-Function-Error"] = "Unhandled"
        ended = time.time()
        self._record(
            name,
            qualifier,
            payload,
            result=None if error else result,
            error_type=error["errorType"] if error else None,
            error_message=error["errorMessage"] if error else None,
            request_id=context.aws_request_id,
            started_at=started,
            ended_at=ended,
        )
        return 200, body, headers

    def _respond_error(
        self,
        request: _InvokeHandler,
        name: str,
        qualifier: str | None,
        payload: Any,
        exc: BaseException,
        error_type: str,
    ) -> None:
        error = {**error_body(exc), "errorType": error_type}
        now = time.time()
        self._record(
            name,
            qualifier,
            payload,
            error_type=error_type,
            error_message=error["errorMessage"],
            started_at=now,
            ended_at=now,
        )
        request.send_json(200, error, {"X-Amz-Function-Error": "Unhandled"})

    def _record(self, name: str, qualifier: str | None, payload: Any, **outcome: Any) -> None:
        """Report one invocation of ``name`` on this thread; ``outcome`` holds the other
        :class:`Invocation` fields."""
        if self._on_invocation is not None:
            self._on_invocation(
                Invocation(
                    function_name=name,
                    qualifier=qualifier,
                    kind=kind_from_function(name),
                    payload=payload,
                    thread=threading.current_thread().name,
                    **outcome,
                )
            )
