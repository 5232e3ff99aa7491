"""Inbound webhooks: ``POST /hooks/{slug}`` starts a run of the workflow that declares the slug.

:func:`handle_webhook` is what ``functions/webhook`` runs for each API Gateway (REST, proxy)
event. The endpoint is public, so a delivery passes these checks in this order, and every
refusal answers in the API's error model and starts no run:

1. **endpoint**: the slug is registered, enabled, and the workflow's live version declares a
   webhook trigger with it; otherwise 404 ``not_found`` (one answer for unknown, disabled and
   deleted slugs, so the answer tells nothing about which slugs exist);
2. **size**: the raw body (base64-decoded when ``isBase64Encoded``) is at most the trigger's
   ``max_body_bytes``; otherwise 413 naming both sizes;
3. **signature** (when the trigger has a ``secret``): :mod:`relayflow.triggers.signatures`
   against the secret's ``AWSCURRENT`` and ``AWSPREVIOUS`` versions; otherwise 401. A failed
   check counts against the sending source's own budget (its IP address; at most
   :data:`FAILED_SIGNATURES_PER_MINUTE` a minute, and at most half the endpoint's rate, in a
   sliding window); a source over it gets 429 before its signature is checked. Forged
   deliveries therefore never use the endpoint's rate, and cannot lock out the real sender;
4. **rate**: a sliding one-minute window per endpoint in DynamoDB
   (:mod:`relayflow.reliability.ratelimit`, so it holds across Lambda instances): never more
   than ``rate_limit_per_minute`` deliveries in any 60 s; over it, 429 with ``Retry-After``;
5. **repeat**: a delivery id seen before (the ``dedup_header``, by default the scheme's
   delivery header, or Stripe's event ``id``) answers what its first delivery was answered,
   with ``Idempotent-Replayed: true``, and starts nothing. The delivery id is not signed, so
   a signed delivery is also remembered by what its signature covers (``signed:<sha256>``):
   a captured delivery replayed with a fresh delivery id is a repeat too;
6. **transform**: the trigger's template, rendered against ``trigger = {body, headers,
   query}``, is the run's input (default: the body); a template that fails is 422.

Then the run starts (``trigger_type`` ``webhook``, idempotency key ``hook:<slug>:<delivery
id>``, so even two racing copies of one delivery start one run) and the answer is 202
``{run_id, status}``, or, with ``respond: sync``, 200 ``{run_id, status, output, error}`` once
the run has finished (polling ``DescribeExecution`` for at most ``sync_timeout_seconds`` and
the Lambda's remaining time) or 202 ``{run_id, status: running}`` when it has not.

Signing secrets are read from Secrets Manager and kept :data:`SECRET_MAX_AGE_SECONDS`; a
signature that matches none of the kept values makes one fresh read before it is refused, so
a rotation is honoured at once (each source's failed-signature budget bounds those reads).
Neither a secret nor a signature is ever logged or put into a run's input.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from relayflow.control.errors import (
    ApiError,
    BadRequest,
    Conflict,
    NotFound,
    PayloadTooLarge,
    ServiceUnavailable,
    TooManyRequests,
    Unauthorized,
    Unprocessable,
)
from relayflow.triggers.signatures import (
    CREDENTIAL_HEADERS,
    DELIVERY_HEADERS,
    SignatureRejected,
    verify_delivery,
    without_signature,
)

SLUG_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{2,63}$")
RATE_WINDOW_SECONDS = 60
#: Failed signature checks a source may make per minute at one endpoint (at most half the
#: endpoint's own rate).
FAILED_SIGNATURES_PER_MINUTE = 10
#: How long a signing secret's values are reused before they are read again.
SECRET_MAX_AGE_SECONDS = 60
#: Secrets Manager's staging labels that verify a signature (a rotation's two sides).
SECRET_STAGES = ("AWSCURRENT", "AWSPREVIOUS")
MAX_DELIVERY_ID = 256
#: ``start_run`` accepts idempotency keys up to this length; longer ones are hashed.
MAX_IDEMPOTENCY_KEY = 256
#: The sync wait stops this long before the Lambda would time out.
SYNC_MARGIN_SECONDS = 1.0
_POLL_FIRST, _POLL_MAX = 0.05, 0.5
NOT_FOUND_MESSAGE = "no webhook is registered at this address"


class MethodNotAllowed(ApiError):
    status, code = 405, "method_not_allowed"


class RateLimited(TooManyRequests):
    """429 with the seconds until the endpoint's window closes."""

    def __init__(self, limit: int, retry_after: int) -> None:
        super().__init__(
            f"this webhook accepts at most {limit} deliveries a minute; retry in {retry_after} s",
            {"limit_per_minute": limit, "retry_after_seconds": retry_after},
        )
        self.retry_after = retry_after


class SignaturesFailing(RateLimited):
    """429 for a source whose deliveries failed the signature check too often: its own
    budget, apart from the endpoint's rate."""

    def __init__(self, limit: int, retry_after: int) -> None:
        TooManyRequests.__init__(
            self,
            f"too many deliveries from this source failed the signature check (at most {limit}"
            f" a minute); retry in {retry_after} s",
            {"failed_signatures_per_minute": limit, "retry_after_seconds": retry_after},
        )
        self.retry_after = retry_after


def failed_signature_limit(rate_limit_per_minute: int) -> int:
    """Failed signature checks one source may make per minute at an endpoint: a budget of its
    own, smaller than the endpoint's rate."""
    return max(1, min(FAILED_SIGNATURES_PER_MINUTE, rate_limit_per_minute // 2))


@dataclass(frozen=True)
class Endpoint:
    """A registered slug, resolved to the trigger its workflow's live version declares."""

    slug: str
    tenant: str
    workflow_id: str
    trigger: Any  # relayflow.definition.models.WebhookTrigger (imported lazily)


# ----------------------------------------------------------------------------- the handler


def handle_webhook(
    event: Mapping[str, Any],
    context: Any = None,
    *,
    control: Any,
    webhooks: Any = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Answer one delivery to ``POST /hooks/{slug}`` (an API Gateway proxy event) with an API
    Gateway proxy response. ``control`` is the :class:`~relayflow.control.service.ControlPlane`
    that starts the run (the webhook function wires the process's); ``webhooks`` (a
    :class:`~relayflow.dal.webhooks.WebhookDal`), ``clock`` and ``sleep`` default to the
    process's own."""
    from relayflow.observability import logger

    slug = _slug(event)
    try:
        return _Delivery(event, context, slug, control, webhooks, clock, sleep).answer()
    except ApiError as exc:
        logger.info(
            "webhook delivery refused",
            extra={"slug": slug, "status": exc.status, "code": exc.code, "reason": exc.message},
        )
        return error_response(exc)
    except Exception as exc:
        request_id = _request_id(event)
        logger.exception(
            "webhook delivery failed",
            extra={"slug": slug, "error": type(exc).__name__, "request_id": request_id},
        )
        return json_response(
            500,
            {
                "code": "internal_error",
                "message": "the webhook could not take the delivery; retry later",
                "details": {"request_id": request_id},
            },
        )


class _Delivery:
    """One delivery, checked step by step (see the module's docstring for the order)."""

    def __init__(
        self,
        event: Mapping[str, Any],
        context: Any,
        slug: str | None,
        control: Any,
        webhooks: Any,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> None:
        from relayflow.dal.webhooks import WebhookDal

        self.event = event
        self.context = context
        self.slug = slug
        self.control = control
        self.webhooks = webhooks or WebhookDal(self.control.dal)
        self.clock = clock
        self.sleep = sleep
        self.started = time.monotonic()

    def answer(self) -> dict[str, Any]:
        from relayflow.observability import logger

        if str(self.event.get("httpMethod") or "POST").upper() != "POST":
            raise MethodNotAllowed("a webhook accepts POST only")
        if self.slug is None:
            raise NotFound(NOT_FOUND_MESSAGE)
        endpoint = _storage(self._endpoint, self.slug)
        trigger = endpoint.trigger
        body = raw_body(self.event)
        if len(body) > trigger.max_body_bytes:
            raise PayloadTooLarge(
                f"body is {len(body)} bytes; this webhook accepts at most "
                f"{trigger.max_body_bytes} bytes",
                {"size_bytes": len(body), "limit_bytes": trigger.max_body_bytes},
            )
        headers = lower_headers(self.event)
        signed: str | None = None
        if trigger.secret is not None:
            # Forged deliveries count against the sender's own, smaller budget, never against
            # the endpoint's rate, so they cannot lock the real sender out.
            _storage(self._refuse_repeated_forgeries, endpoint)
            signed = f"signed:{self._verify(endpoint, body, headers)}"
        _storage(self._count, endpoint)
        payload = parse_payload(body)
        delivery_id = _delivery_id(trigger, headers, payload)
        remembered = [key for key in (delivery_id, signed) if key is not None]
        for key in remembered:
            stored = _storage(self.webhooks.get_delivery, endpoint.slug, key)
            if stored is not None:
                logger.info(
                    "webhook delivery repeated",
                    extra={"slug": endpoint.slug, "delivery_id": delivery_id, "seen_as": key},
                )
                return _replayed(stored.status_code, stored.body)
        run_input = transformed(
            trigger.transform,
            payload,
            without_signature(headers, trigger.signature_header),
            self.event,
        )
        status, answer = self._start(endpoint, run_input, delivery_id or signed)
        logger.info(
            "webhook delivery accepted",
            extra={
                "slug": endpoint.slug,
                "tenant": endpoint.tenant,
                "workflow_id": endpoint.workflow_id,
                "run_id": answer["run_id"],
                "delivery_id": delivery_id,
                "status": status,
            },
        )
        if not remembered:
            return json_response(status, answer)
        return self._remember(endpoint, remembered, status, answer)

    # -- the checks --------------------------------------------------------------------------

    def _endpoint(self, slug: str) -> Endpoint:
        dal = self.control.dal
        hook = dal.get_hook(slug)
        if hook is None or not hook.enabled:
            raise NotFound(NOT_FOUND_MESSAGE)
        head = dal.get_workflow(hook.tenant, hook.workflow_id)
        if head is None or not head.enabled:
            raise NotFound(NOT_FOUND_MESSAGE)
        version = dal.get_version(hook.tenant, hook.workflow_id, head.live_version)
        trigger = None
        if version is not None:
            trigger = declared_trigger(version.definition, slug, hook.trigger_index)
        if trigger is None:
            raise NotFound(NOT_FOUND_MESSAGE)
        return Endpoint(slug, hook.tenant, hook.workflow_id, trigger)

    def _limiter(self) -> Any:
        from relayflow.reliability.ratelimit import SlidingWindowLimiter

        return SlidingWindowLimiter(self.webhooks.rate_windows, clock=self.clock)

    def _count(self, endpoint: Endpoint) -> None:
        """Admit the delivery within the endpoint's sliding one-minute window."""
        from relayflow.dal.webhooks import rate_partition

        limit = endpoint.trigger.rate_limit_per_minute
        admission = self._limiter().admit(
            rate_partition(endpoint.slug), limit, RATE_WINDOW_SECONDS, tenant=endpoint.tenant
        )
        if not admission.admitted:
            raise RateLimited(limit, max(1, math.ceil(admission.retry_after)))

    def _source(self) -> str:
        context = self.event.get("requestContext") or {}
        source = (context.get("identity") or {}).get("sourceIp")
        return source if isinstance(source, str) and source else "unknown"

    def _refuse_repeated_forgeries(self, endpoint: Endpoint) -> None:
        """429 for a source whose signatures failed too often in the last minute."""
        from relayflow.dal.webhooks import signature_failures_partition

        limit = failed_signature_limit(endpoint.trigger.rate_limit_per_minute)
        pk = signature_failures_partition(endpoint.slug, self._source())
        verdict = self._limiter().check(pk, limit, RATE_WINDOW_SECONDS)
        if not verdict.admitted:
            raise SignaturesFailing(limit, max(1, math.ceil(verdict.retry_after)))

    def _count_forgery(self, endpoint: Endpoint) -> None:
        from relayflow.dal.webhooks import signature_failures_partition

        limit = failed_signature_limit(endpoint.trigger.rate_limit_per_minute)
        pk = signature_failures_partition(endpoint.slug, self._source())
        self._limiter().admit(pk, limit, RATE_WINDOW_SECONDS, tenant=endpoint.tenant)

    def _verify(self, endpoint: Endpoint, body: bytes, headers: Mapping[str, str]) -> str:
        """The digest of what the delivery's signature covers, or 401."""
        trigger = endpoint.trigger

        def check(secrets: tuple[str, ...]) -> str:
            return verify_delivery(
                trigger.signature_scheme,
                body,
                headers,
                secrets,
                now=self.clock(),
                window_seconds=trigger.replay_window_seconds,
                header=trigger.signature_header,
            )

        try:
            try:
                return check(signing_secrets(trigger.secret, endpoint.tenant))
            except SignatureRejected as exc:
                if exc.reason != "mismatch":
                    raise
                # The secret may have rotated since it was read: read it again, once.
                return check(signing_secrets(trigger.secret, endpoint.tenant, refresh=True))
        except SignatureRejected as exc:
            _storage(self._count_forgery, endpoint)
            raise Unauthorized(str(exc), {"reason": exc.reason, "header": exc.header}) from None

    def _start(
        self, endpoint: Endpoint, run_input: Any, delivery_id: str | None
    ) -> tuple[int, dict[str, Any]]:
        key = idempotency_key(endpoint.slug, delivery_id) if delivery_id is not None else None
        try:
            started = self.control.start_run(
                endpoint.tenant,
                endpoint.workflow_id,
                run_input,
                idempotency_key=key,
                trigger_type="webhook",
            )
        except NotFound as exc:
            raise NotFound(NOT_FOUND_MESSAGE) from exc
        except Conflict as exc:
            # The workflow was disabled a moment ago, or a copy of this delivery is starting
            # the same run: the sender retries. (Conflict's message names the workflow.)
            raise Conflict("the delivery could not start a run now; retry shortly") from exc
        if started.admission is not None:
            # Queued, skipped (run_id names the running run), debounced or batched: no run of
            # this delivery's own to wait for (docs/flow-control.md).
            answer = {"run_id": started.run_id, "status": started.status}
            # A batch's answer says how many triggers it holds; a debounce's, when it starts.
            folded = {"batch_size": started.batch_size, "starts_at": started.starts_at}
            answer.update({k: v for k, v in folded.items() if v is not None})
            return 202, {**answer, "admission": started.admission}
        if endpoint.trigger.respond == "sync":
            return self._wait(endpoint, started.run_id)
        return 202, {"run_id": started.run_id, "status": started.status}

    def _wait(self, endpoint: Endpoint, run_id: str) -> tuple[int, dict[str, Any]]:
        """Poll the run's execution until it ends or the bounded wait is over."""
        from relayflow.control.limits import RUN_STATUS
        from relayflow.executions.stepfunctions import StepFunctionsError

        budget = float(endpoint.trigger.sync_timeout_seconds)
        remaining_ms = getattr(self.context, "get_remaining_time_in_millis", None)
        if callable(remaining_ms):
            budget = min(budget, remaining_ms() / 1000.0 - SYNC_MARGIN_SECONDS)
        deadline = self.started + budget
        run = _storage(self.control.dal.get_run, endpoint.tenant, run_id)
        arn = run.execution_arn if run is not None else None
        express = run is not None and run.engine == "express"
        interval = _POLL_FIRST
        while arn is not None:
            try:
                described = self._described(endpoint, run_id, arn, express=express)
            except StepFunctionsError:
                break  # the run has started; the sender learns its end some other way
            status = str(described.get("status", "RUNNING"))
            if status != "RUNNING":
                output = described.get("output")
                return 200, {
                    "run_id": run_id,
                    "status": RUN_STATUS.get(status, status.lower()),
                    "output": json.loads(output) if output else None,
                    "error": described.get("error"),
                }
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.sleep(min(interval, left))
            interval = min(interval * 2, _POLL_MAX)
        return 202, {"run_id": run_id, "status": "running"}

    def _described(
        self, endpoint: Endpoint, run_id: str, arn: str, *, express: bool
    ) -> dict[str, Any]:
        """The execution's status, output and error. An Express execution cannot be described
        (docs/engines.md); its machine records its end on the run item, which is read instead."""
        if not express:
            return self.control.machines.describe(arn) or {}
        run = _storage(self.control.dal.get_run, endpoint.tenant, run_id)
        if run is None or run.status == "running":
            return {"status": "RUNNING"}
        return {"status": run.status.upper(), "output": run.output, "error": run.error}

    def _remember(
        self, endpoint: Endpoint, keys: list[str], status: int, answer: dict[str, Any]
    ) -> dict[str, Any]:
        """Store the answer for repeats under each of ``keys`` (the delivery id, the signed
        digest); when a racing copy stored one first, give that."""
        from relayflow.control.times import now_iso
        from relayflow.dal.webhooks import DeliveryItem, delivery_expiry

        body = _dumps(answer)
        first: DeliveryItem | None = None
        for key in keys:
            item = DeliveryItem(
                slug=endpoint.slug,
                delivery_id=key,
                tenant=endpoint.tenant,
                workflow_id=endpoint.workflow_id,
                run_id=answer["run_id"],
                status_code=status,
                body=body,
                created_at=now_iso(),
                expires_at=delivery_expiry(self.clock()),
            )
            kept = _storage(self.webhooks.save_delivery, item)
            if first is None and kept is not item:
                first = kept
        if first is None:
            return json_response(status, answer)
        return _replayed(first.status_code, first.body)


# ----------------------------------------------------------------------------- the pieces


def _slug(event: Mapping[str, Any]) -> str | None:
    """The slug from the path parameters (or the path), when it is one a trigger may use."""
    slug = (event.get("pathParameters") or {}).get("slug")
    if slug is None:
        parts = str(event.get("path") or "").strip("/").split("/")
        slug = parts[1] if len(parts) == 2 and parts[0] == "hooks" else None
    return slug if isinstance(slug, str) and SLUG_PATTERN.match(slug) else None


def _request_id(event: Mapping[str, Any]) -> str:
    return str((event.get("requestContext") or {}).get("requestId") or uuid.uuid4())


def declared_trigger(definition_json: str, slug: str, index: int | None) -> Any:
    """The webhook trigger with ``slug`` in a stored definition (``index`` first: where the
    registration says it is), or ``None``."""
    from relayflow.definition.models import WebhookTrigger

    triggers = json.loads(definition_json).get("triggers") or []
    candidates = list(triggers)
    if isinstance(index, int) and 0 <= index < len(triggers):
        candidates.insert(0, triggers[index])
    for raw in candidates:
        if isinstance(raw, Mapping) and raw.get("type") == "webhook" and raw.get("slug") == slug:
            return WebhookTrigger.model_validate(raw)
    return None


def raw_body(event: Mapping[str, Any]) -> bytes:
    """The exact bytes the sender posted (what a signature covers)."""
    body = event.get("body")
    if body is None:
        return b""
    if event.get("isBase64Encoded"):
        try:
            return base64.b64decode(str(body), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise BadRequest("the request body is not valid base64") from exc
    return str(body).encode("utf-8")


def lower_headers(event: Mapping[str, Any]) -> dict[str, str]:
    """Header names in lower case (HTTP names are case-insensitive; API Gateway keeps the
    sender's spelling). A repeated header keeps its last value, as API Gateway's
    ``headers`` does."""
    headers: dict[str, str] = {}
    for name, values in (event.get("multiValueHeaders") or {}).items():
        if values:
            headers[str(name).lower()] = str(values[-1])
    for name, value in (event.get("headers") or {}).items():
        if value is not None:
            headers[str(name).lower()] = str(value)
    return headers


def parse_payload(body: bytes) -> Any:
    """The body as JSON, or ``{"raw": <text>}`` when it is not JSON (form posts, plain
    text, broken JSON; bytes that are not UTF-8 are replaced). JSON that the intake policy
    (:mod:`relayflow.intake`) refuses is 400 or 422 naming the path and the rule: a delivery
    that would start a run nothing could read back starts none."""
    from relayflow.intake import IntakeError, loads

    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return {"raw": body.decode("utf-8", errors="replace")}
    try:
        return loads(text)
    except json.JSONDecodeError:
        return {"raw": text}
    except IntakeError as exc:
        refusal = exc.under("body")
        details = [{"path": refusal.path, "rule": refusal.rule, "message": refusal.message}]
        if refusal.status == 400:
            raise BadRequest(refusal.message, details) from None
        raise Unprocessable(refusal.message, details) from None


def _delivery_id(trigger: Any, headers: Mapping[str, str], payload: Any) -> str | None:
    if trigger.dedup_header:
        value = headers.get(trigger.dedup_header.lower())
    elif trigger.signature_scheme == "stripe":
        value = payload.get("id") if isinstance(payload, Mapping) else None
    else:
        header = DELIVERY_HEADERS[trigger.signature_scheme]
        value = headers.get(header) if header else None
    if not isinstance(value, str) or not value.strip():
        return None
    value = value.strip()
    if len(value) > MAX_DELIVERY_ID:
        raise BadRequest(f"a delivery id has at most {MAX_DELIVERY_ID} characters")
    return value


def idempotency_key(slug: str, delivery_id: str) -> str:
    """``hook:<slug>:<delivery id>`` (a long id is replaced by its sha256)."""
    key = f"hook:{slug}:{delivery_id}"
    if len(key) > MAX_IDEMPOTENCY_KEY:
        key = f"hook:{slug}:sha256:{hashlib.sha256(delivery_id.encode()).hexdigest()}"
    return key


def transformed(
    template: Any, payload: Any, headers: Mapping[str, str], event: Mapping[str, Any]
) -> Any:
    """The run's input: the payload, or the trigger's template rendered against
    ``trigger = {body, headers, query}`` (credential and signature headers left out)."""
    if template is None:
        return payload
    from relayflow.errors import ExpressionError
    from relayflow.expressions import render

    document = {
        "trigger": {
            "body": payload,
            "headers": {k: v for k, v in headers.items() if k not in CREDENTIAL_HEADERS},
            "query": dict(event.get("queryStringParameters") or {}),
        }
    }
    try:
        return render(template, document)
    except ExpressionError as exc:
        raise Unprocessable(
            f"the webhook's transform failed on this delivery: {exc.message}"
        ) from None


# ----------------------------------------------------------------------------- secrets


@dataclass
class _Cached:
    client: Any
    fetched: float
    values: tuple[str, ...]


_secrets_lock = threading.Lock()
_secrets: dict[tuple[str, str, str | None], _Cached] = {}


def signing_secrets(ref: Any, tenant: str, *, refresh: bool = False) -> tuple[str, ...]:
    """The values that verify signatures for ``ref`` (a SecretRef) of ``tenant``, the tenant
    that owns the webhook: Secrets Manager's ``AWSCURRENT`` and, during a rotation,
    ``AWSPREVIOUS`` (an SSM parameter has only its current value). Kept
    :data:`SECRET_MAX_AGE_SECONDS`; ``refresh`` reads them again.

    The name is scoped to the tenant's folder (:func:`relayflow.tools.secrets.secret_path`)
    and read with the tenant's identity, so a webhook can only ever be verified with its own
    tenant's key: a name reaching outside it (published before names were checked) makes
    the webhook answer 503, never verify with another tenant's key.

    Powertools' ``SecretsProvider`` is not used here: its cache key ignores ``VersionStage``,
    so the two versions of one secret would overwrite each other in it."""
    from relayflow.adapters.tenant_aws import tenant_client
    from relayflow.observability import logger
    from relayflow.tenancy import TenantBoundary
    from relayflow.tools.secrets import secret_path

    service = "ssm" if ref.source == "ssm" else "secretsmanager"
    try:
        name = secret_path(ref.name, tenant, service)
    except TenantBoundary:
        logger.error("webhook signing secret outside its tenant", extra={"secret_name": ref.name})
        raise ServiceUnavailable("this webhook cannot verify signatures now; retry later") from None
    current = tenant_client(service, tenant)
    key = (service, name, ref.field)
    now = time.monotonic()
    with _secrets_lock:
        cached = _secrets.get(key)
    if (
        not refresh
        and cached is not None
        and cached.client is current
        and now - cached.fetched < SECRET_MAX_AGE_SECONDS
    ):
        return cached.values
    values = _read_secret(current, service, name, ref)
    with _secrets_lock:
        _secrets[key] = _Cached(current, now, values)
    return values


def _read_secret(aws: Any, service: str, name: str, ref: Any) -> tuple[str, ...]:
    from botocore.exceptions import BotoCoreError, ClientError

    from relayflow.observability import logger

    values: list[str] = []
    try:
        if service == "ssm":
            answer = aws.get_parameter(Name=name, WithDecryption=True)
            values.append(_pick(answer["Parameter"]["Value"], ref))
        else:
            for stage in SECRET_STAGES:
                try:
                    answer = aws.get_secret_value(SecretId=name, VersionStage=stage)
                except ClientError as exc:
                    missing = exc.response.get("Error", {}).get("Code")
                    if stage != "AWSCURRENT" and missing == "ResourceNotFoundException":
                        continue  # never rotated: there is no previous version
                    raise
                text = answer.get("SecretString")
                if text is None:
                    text = bytes(answer.get("SecretBinary") or b"").decode("utf-8")
                values.append(_pick(text, ref))
    except (ClientError, BotoCoreError, ValueError, KeyError) as exc:
        code = getattr(exc, "response", {}).get("Error", {}).get("Code") or type(exc).__name__
        logger.error(
            "webhook signing secret unreadable",
            extra={"secret_name": ref.name, "source": service, "error": code},
        )
        raise ServiceUnavailable("this webhook cannot verify signatures now; retry later") from None
    return tuple(v for v in values if v)


def _pick(text: str, ref: Any) -> str:
    """The secret's text, or one field of a JSON secret."""
    if ref.field is None:
        return text
    parsed = json.loads(text)
    if not isinstance(parsed, Mapping) or ref.field not in parsed:
        raise ValueError("the secret has no such field")
    picked = parsed[ref.field]
    return picked if isinstance(picked, str) else json.dumps(picked)


# ----------------------------------------------------------------------------- responses


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def json_response(
    status: int, body: Any, headers: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """An API Gateway proxy response with a JSON body."""
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json", **(headers or {})},
        "body": body if isinstance(body, str) else _dumps(body),
        "isBase64Encoded": False,
    }


def error_response(exc: ApiError) -> dict[str, Any]:
    headers: dict[str, str] = {}
    if isinstance(exc, RateLimited):
        headers["Retry-After"] = str(exc.retry_after)
    elif isinstance(exc, MethodNotAllowed):
        headers["Allow"] = "POST"
    return json_response(exc.status, exc.to_dict(), headers)


def _replayed(status: int, body: str) -> dict[str, Any]:
    return json_response(status, body, {"Idempotent-Replayed": "true"})


def _storage(call: Callable[..., Any], *args: Any) -> Any:
    """Run a data-access call; its failures become 503 (the sender retries)."""
    from relayflow.dal import DataAccessError
    from relayflow.observability import logger

    try:
        return call(*args)
    except DataAccessError as exc:
        logger.error(
            "webhook storage failed", extra={"error": type(exc).__name__, "reason": str(exc)}
        )
        raise ServiceUnavailable("the webhook could not reach its storage; retry later") from exc
