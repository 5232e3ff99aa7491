"""One place that sets up logging, metrics and tracing for every function.

* **Logger** (Powertools, JSON lines on stderr): :func:`step_handler` puts run id, workflow id,
  step key, step type, attempt and tenant on every line a step writes, and
  :func:`function_handler` the Lambda context's keys on every line a platform function
  writes; both keep them per thread. Values of keys that look like credentials
  (``authorization``, ``password``, ``secret``, ``token``, ``api_key``, ``x-api-key``,
  ``signature`` …) are masked, and so are ``Bearer …``, ``token=…`` fragments and credential
  parameters of a URL's query (a guest link's ``sig=``) inside text, before a line is
  written (:class:`RedactingFormatter`).
* **Metrics** (CloudWatch embedded metric format): :func:`step_handler` emits
  ``StepSucceeded``, ``StepFailed`` or ``StepThrottled`` (Count) and ``StepDuration``
  (Milliseconds) with the dimensions ``service``, ``Stage`` and ``StepType``, flushed once per
  invocation. The namespace is ``POWERTOOLS_METRICS_NAMESPACE`` (``Relayflow`` when unset).
  Metrics are written only inside Lambda: stdout is where EMF belongs there, while locally
  stdout is a command's output (``relayflow run --json``).
* **Tracer**: not loaded by default. Lambda active tracing (``Tracing: Active``) and Step
  Functions' X-Ray tracing already record a segment per invocation; the Powertools Tracer
  would import the X-Ray SDK, which costs twice ``import boto3`` on every cold start. Code
  that needs custom subsegments calls :func:`get_tracer` (see ``docs/operations.md``).

``POWERTOOLS_SERVICE_NAME``, ``POWERTOOLS_METRICS_NAMESPACE`` and ``POWERTOOLS_LOG_LEVEL`` come
from the template's Globals. Observability never changes a step's outcome: a failure to emit
a metric is logged and swallowed, the step's own result or exception passes through as is.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from relayflow.errors import RelayflowError
from relayflow.tenancy import acting_for

Handler = Callable[[dict[str, Any], Any], Any]

SERVICE = "relayflow"
DEFAULT_NAMESPACE = "Relayflow"
#: The error a step raises when flow control refuses it (counted as StepThrottled).
THROTTLED_ERROR = "Relayflow.Throttled"
MASK = "***"

# ----------------------------------------------------------------------------- redaction

#: A key is sensitive when one of its words is one of these (``client_secret``,
#: ``X-Hub-Signature-256``, ``accessToken``) …
_SENSITIVE_WORDS = frozenset(
    {
        "authorization",
        "apikey",
        "cookie",
        "credential",
        "credentials",
        "passphrase",
        "passwd",
        "password",
        "secret",
        "signature",
        "token",
    }
)
#: … or it holds one of these word pairs (``x-api-key``, ``private_key``).
_SENSITIVE_PAIRS = frozenset({("api", "key"), ("private", "key"), ("session", "key")})
#: … unless it only names or describes the secret (``secret_name``, ``token_type``).
_DESCRIPTIVE_LAST_WORDS = frozenset(
    {"arn", "arns", "id", "ids", "name", "names", "path", "ref", "source", "type", "url"}
)
_WORD_SPLIT = re.compile(r"[^a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
#: Credentials inside free text: ``Bearer abc``, ``password=abc``, ``"api_key": "abc"``, and
#: the signature of a signed link in a URL's query (``?…&sig=abc``).
_TEXT_PATTERNS = (
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}"), r"\1 " + MASK),
    (
        re.compile(
            r"(?i)([?&;](?:sig|signature|key|apikey|access_token|code|secret)=)([^&#\s\"']+)"
        ),
        r"\1" + MASK,
    ),
    (
        re.compile(
            r"(?i)((?:authorization|password|passwd|secret|token|signature|api[_-]?key)"
            r"[\"']?\s*[:=]\s*[\"']?)([^\s\"'&,;}]+)"
        ),
        r"\1" + MASK,
    ),
)
_MAX_DEPTH = 12


@functools.lru_cache(maxsize=1024)
def is_sensitive_key(key: str) -> bool:
    """Whether a log field named ``key`` may hold a credential."""
    words = [w for w in _WORD_SPLIT.split(_CAMEL.sub("_", key).lower()) if w]
    if not words or words[-1] in _DESCRIPTIVE_LAST_WORDS:
        return False
    if any(word in _SENSITIVE_WORDS for word in words):
        return True
    return any(pair in _SENSITIVE_PAIRS for pair in itertools.pairwise(words))


def redact_text(text: str) -> str:
    """``text`` with bearer tokens and ``key=value`` credentials masked."""
    for pattern, replacement in _TEXT_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact(value: Any, _depth: int = 0) -> Any:
    """A copy of ``value`` with the values of sensitive keys masked, at any depth."""
    if _depth > _MAX_DEPTH:
        return MASK
    if isinstance(value, dict):
        return {
            k: MASK
            if isinstance(k, str) and is_sensitive_key(k) and v not in (None, "")
            else redact(v, _depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v, _depth + 1) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


class RedactingFormatter(LambdaPowertoolsFormatter):
    """Powertools' JSON formatter, masking credentials in every field of a line (message,
    extra keys, appended keys, exception text) just before it is written."""

    def serialize(self, log: dict[str, Any]) -> str:  # type: ignore[override]
        return super().serialize(redact(log))


#: stderr: Lambda sends it to CloudWatch like stdout, and locally it keeps a command's stdout
#: (``relayflow run --json``) free of log lines.
logger = Logger(service=SERVICE, stream=sys.stderr, logger_formatter=RedactingFormatter())


# ----------------------------------------------------------------------------- metrics


def _in_lambda() -> bool:
    """Whether this process is a Lambda execution environment (or ``sam local``)."""
    return "AWS_LAMBDA_FUNCTION_NAME" in os.environ


def _stage() -> str:
    from relayflow.settings import get_settings

    return get_settings().stage


def _metric_set(**dimensions: str) -> Any:
    """An empty EMF metric set: the namespace, and the dimensions service, Stage and ours."""
    from aws_lambda_powertools.metrics import EphemeralMetrics

    namespace = os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or DEFAULT_NAMESPACE
    metrics = EphemeralMetrics(namespace=namespace, service=SERVICE)
    metrics.add_dimension(name="Stage", value=_stage())
    for name, value in dimensions.items():
        metrics.add_dimension(name=name, value=value)
    return metrics


def _flat(document: dict[str, Any]) -> dict[str, Any]:
    """One value per metric as a number, not a one-item list: EMF accepts both, and Logs
    Insights can then sort and filter on the field (``sort StepDuration desc``)."""
    for directive in document["_aws"]["CloudWatchMetrics"]:
        for metric in directive["Metrics"]:
            value = document.get(metric["Name"])
            if isinstance(value, list) and len(value) == 1:
                document[metric["Name"]] = value[0]
    return document


def step_metrics(
    step_type: str, duration_ms: float, error: str | None, keys: dict[str, Any]
) -> dict[str, Any]:
    """The EMF document for one step invocation (one line, all metrics, one dimension set).
    Correlation keys ride along as metadata so Logs Insights can sort steps by duration."""
    metrics = _metric_set(StepType=step_type)
    throttled = error == THROTTLED_ERROR
    metrics.add_metric(name="StepSucceeded", unit="Count", value=int(error is None))
    metrics.add_metric(
        name="StepFailed", unit="Count", value=int(error is not None and not throttled)
    )
    if throttled:
        metrics.add_metric(name="StepThrottled", unit="Count", value=1)
    metrics.add_metric(name="StepDuration", unit="Milliseconds", value=duration_ms)
    for key in ("run_id", "workflow_id", "step_key", "attempt", "tenant"):
        if key in keys:
            metrics.add_metadata(key=key, value=keys[key])
    if error is not None:
        metrics.add_metadata(key="error", value=error)
    return _flat(metrics.serialize_metric_set())


def record_metric(name: str, value: float, unit: str = "Count", **dimensions: str) -> None:
    """Emit one metric outside a step's own (``BreakerTrips``, ``DlqDepth`` …) in the Relayflow
    namespace, with the dimensions service and Stage plus ``dimensions``: the names and
    dimensions the dashboard and the alarms in template.yaml expect. Written only inside
    Lambda, and never raises."""
    if not _in_lambda():
        return
    try:
        metrics = _metric_set(**dimensions)
        metrics.add_metric(name=name, unit=unit, value=value)
        _emit(_flat(metrics.serialize_metric_set()))
    except Exception as exc:  # a metric must never change the caller's outcome
        logger.warning("metric not emitted", extra={"metric": name, "reason": str(exc)})


_emit_lock = threading.Lock()


def _emit(document: dict[str, Any]) -> None:
    line = json.dumps(document, separators=(",", ":"), default=str)
    with _emit_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _record(step_type: str, duration_ms: float, error: str | None, keys: dict[str, Any]) -> None:
    if not _in_lambda():
        return
    try:
        _emit(step_metrics(step_type, duration_ms, error, keys))
    except Exception as exc:  # a metric must never change a step's outcome
        logger.warning("step metrics not emitted", extra={"reason": str(exc)})


# ----------------------------------------------------------------------------- tracing


@functools.lru_cache(maxsize=1)
def get_tracer() -> Any | None:
    """The Powertools Tracer, created on first call; ``None`` when the X-Ray SDK is not
    installed (the layer does not ship it: add ``aws-lambda-powertools[tracer]`` to
    ``shared/requirements.txt`` before using custom subsegments)."""
    try:
        from aws_lambda_powertools import Tracer

        return Tracer(service=SERVICE)
    except ImportError:
        return None


# ----------------------------------------------------------------------------- middleware

_cold_start = True
_cold_start_lock = threading.Lock()


def _take_cold_start() -> bool:
    global _cold_start
    with _cold_start_lock:
        cold, _cold_start = _cold_start, False
    return cold


def context_keys(context: Any) -> dict[str, Any]:
    """The Lambda context's keys for a log line (what Powertools' ``inject_lambda_context``
    adds); missing attributes are left out."""
    keys = {
        "function_name": getattr(context, "function_name", None),
        "function_memory_size": getattr(context, "memory_limit_in_mb", None),
        "function_arn": getattr(context, "invoked_function_arn", None),
        "function_request_id": getattr(context, "aws_request_id", None),
    }
    return {k: v for k, v in keys.items() if v is not None}


def function_handler(func: Handler) -> Handler:
    """Decorate a platform function's handler (api, webhook, recorder …): the Lambda
    context's keys and ``cold_start`` on every line it writes.

    The keys are held per thread (Powertools' ``thread_safe_*`` keys), never in the logger's
    shared format: the local server runs several functions at once in one process, where
    shared keys would put one function's name on another's lines, and a key appended while
    another thread writes a line made that line fail ("dictionary changed size during
    iteration")."""

    @functools.wraps(func)
    def wrapper(event: dict[str, Any], context: Any) -> Any:
        keys = {**context_keys(context), "cold_start": _take_cold_start()}
        logger.thread_safe_append_keys(**keys)
        try:
            return func(event, context)
        finally:
            logger.thread_safe_remove_keys(list(keys))

    return wrapper


def step_keys(event: dict[str, Any]) -> dict[str, Any]:
    """The correlation keys of a step Task payload (missing ones are left out)."""
    step = event.get("step") or {}
    doc = event.get("doc") or {}
    run = doc.get("run") or {}
    context = event.get("context") or {}
    keys = {
        "run_id": run.get("id"),
        "workflow_id": run.get("workflow_id"),
        "tenant": run.get("tenant"),
        "step_key": step.get("key"),
        "step_type": step.get("type"),
        "attempt": context.get("attempt"),
    }
    return {k: v for k, v in keys.items() if v is not None}


def item_index(event: Any) -> int | None:
    """The ``for_each`` item a step Task payload runs for (``$.index`` of its document, the
    innermost item's), or ``None`` outside a ``for_each``."""
    doc = event.get("doc") if isinstance(event, dict) else None
    index = doc.get("index") if isinstance(doc, dict) else None
    return index if isinstance(index, int) and not isinstance(index, bool) else None


def _error_name(exc: BaseException) -> str:
    return str(getattr(type(exc), "error_name", None) or type(exc).__name__)


def step_handler(func: Handler) -> Handler:
    """Decorate a step function's handler: the run's tenant as the acting tenant
    (:func:`relayflow.tenancy.acting_for`), correlation keys (and the Lambda context's) on
    every log line this thread writes, one line per failure with its full trace, and one
    metrics line per invocation. Exceptions propagate with their class (its name is the
    ASL error name): a Relayflow error reports its details after its message
    (:meth:`relayflow.errors.RelayflowError.reported`), and every exception leaves without
    the engine's frames (they are in the log line), so the cause Lambda reports holds no
    more of the server than the decorator's own frame."""

    @functools.wraps(func)
    def wrapper(event: dict[str, Any], context: Any) -> Any:
        keys = step_keys(event if isinstance(event, dict) else {})
        step_type = str(keys.get("step_type") or "unknown")
        line_keys = {**context_keys(context), **keys}
        logger.thread_safe_append_keys(**line_keys)
        started = time.perf_counter()
        error: str | None = None
        try:
            # The step acts for its run's tenant: its secrets and AWS calls are that tenant's
            # (relayflow.tenancy); a payload without one acts for nobody and such calls refuse.
            with acting_for(keys.get("tenant")):
                return func(event, context)
        except Exception as exc:
            error = _error_name(exc)
            duration_ms = round((time.perf_counter() - started) * 1000.0, 3)
            # The whole trace goes to the log, with the run id; what the tenant sees of the
            # error is only its name and message (relayflow.causes).
            logger.warning(
                "step failed",
                extra={"error": type(exc).__name__, "reason": str(exc), "duration_ms": duration_ms},
                exc_info=exc,
            )
            if isinstance(exc, RelayflowError):
                index = item_index(event)
                if index is not None:  # which for_each item failed, wherever it is read
                    exc.details.setdefault("item_index", index)
                exc.args = (exc.reported(),)
            raise exc.with_traceback(None)  # noqa: B904 (the same exception, re-raised)
        finally:
            _record(step_type, (time.perf_counter() - started) * 1000.0, error, keys)
            logger.thread_safe_remove_keys(list(line_keys))

    return wrapper
