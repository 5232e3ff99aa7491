"""The workflow definition format (YAML or JSON), as pydantic models.

These models are the single source of the definition format: ``relayflow schema`` prints the
JSON Schema generated from them, and ``docs/definitions.md`` documents the same fields.
Structural rules that span several fields (references, reachability, cycles, templates) live
in :mod:`relayflow.validation.validate`, which runs after these models parse.

Step models live in :mod:`relayflow.definition.step_models` and the shared field types in
:mod:`relayflow.definition.model_fields`; every model stays importable from this module.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from relayflow.definition.admission import (
    BatchSettings,
    CancelOn,
    CatchUpSettings,
    ConcurrencySettings,
    DebounceSettings,
    SingletonSettings,
)
from relayflow.definition.engine_setting import EngineSetting
from relayflow.definition.input_schema import InputSchemaSetting
from relayflow.definition.model_fields import (
    STEP_KEY_PATTERN,
    WORKFLOW_ID_PATTERN,
    DefinitionModel,
    DryRunOutput,
    HeaderName,
    StepKey,
    Template,
    TemplateValue,
    TimeZoneName,
)
from relayflow.definition.policies import StepDefaults
from relayflow.definition.run_events import EmailAddress, EventSettings
from relayflow.definition.step_models import (
    AVAILABLE_STEP_TYPES,
    MAX_DELAY_SECONDS,
    STEP_TYPES,
    AgentStep,
    ApiKeyAuth,
    ApprovalStep,
    BasicAuth,
    BearerAuth,
    BreakerSettings,
    CodeStep,
    Concurrency,
    ConditionStep,
    CustomStep,
    DelayStep,
    ForEachStep,
    HmacAuth,
    HttpAuth,
    HttpOperation,
    HttpTool,
    LlmBatchStep,
    NoopStep,
    ParallelStep,
    RateLimit,
    SecretRef,
    Step,
    SubWorkflowStep,
    ToolStep,
    TransformStep,
    WaitForEventStep,
    WaitpointStep,
    WebhookOutStep,
)

#: Every model of the format, kept importable from here.
__all__ = [
    "AVAILABLE_STEP_TYPES",
    "MAX_DELAY_SECONDS",
    "STEP_KEY_PATTERN",
    "STEP_TYPES",
    "WORKFLOW_ID_PATTERN",
    "AgentStep",
    "ApiKeyAuth",
    "ApprovalStep",
    "AtTrigger",
    "BasicAuth",
    "BearerAuth",
    "BreakerSettings",
    "CodeStep",
    "Concurrency",
    "ConditionStep",
    "CronTrigger",
    "CustomStep",
    "DelayStep",
    "DryRunOutput",
    "ErrorSettings",
    "EventTrigger",
    "ForEachStep",
    "HeaderName",
    "HmacAuth",
    "HttpAuth",
    "HttpOperation",
    "HttpTool",
    "LlmBatchStep",
    "ManualTrigger",
    "NoopStep",
    "NotificationEmail",
    "NotificationSettings",
    "NotificationWebhook",
    "NotifyOn",
    "ParallelStep",
    "RateLimit",
    "SecretRef",
    "Step",
    "StepKey",
    "SubWorkflowStep",
    "Template",
    "TemplateValue",
    "TimeZoneName",
    "ToolStep",
    "TransformStep",
    "Trigger",
    "WaitForEventStep",
    "WaitpointStep",
    "WebhookOutStep",
    "WebhookTrigger",
    "Workflow",
]


# --------------------------------------------------------------------------- triggers


class ManualTrigger(DefinitionModel):
    type: Literal["manual"]


class CronTrigger(DefinitionModel):
    type: Literal["cron"]
    cron: str = Field(description="Standard 5-field cron expression.")
    timezone: TimeZoneName = "UTC"
    input: TemplateValue = Field(default_factory=dict, description="Trigger payload of each run.")
    overlap: Literal["skip", "buffer_one", "allow"] = Field(
        "allow",
        description="A tick while this schedule's previous run still runs: skip it, keep one "
        "to start when that run ends (buffer_one), or start it anyway (allow). See "
        "docs/flow-control.md.",
    )
    catch_up: CatchUpSettings | None = Field(
        None,
        description="Run missed ticks (disabled workflow, open breaker, deploy gap) once each, "
        "oldest first, within the window; older ones are recorded as skipped.",
    )


class AtTrigger(DefinitionModel):
    type: Literal["at"]
    at: datetime = Field(description="One-time ISO-8601 start time.")
    timezone: TimeZoneName = "UTC"
    input: TemplateValue = Field(default_factory=dict)


class EventTrigger(DefinitionModel):
    type: Literal["event"]
    source: str | None = None
    detail_type: str | None = None
    pattern: dict[str, Any] | None = Field(None, description="A full EventBridge event pattern.")
    filter: str | None = Field(None, description="CEL expression over the event (as trigger).")

    @model_validator(mode="after")
    def _something_to_match(self) -> EventTrigger:
        if not (self.source or self.detail_type or self.pattern):
            raise ValueError("an event trigger needs source, detail_type or pattern")
        return self


class WebhookTrigger(DefinitionModel):
    """A public endpoint ``POST /hooks/<slug>`` that starts a run per accepted delivery."""

    type: Literal["webhook"]
    slug: str = Field(
        pattern=r"^[a-z0-9][a-z0-9-]{2,63}$", description="Globally unique path segment."
    )
    secret: SecretRef | None = Field(
        None,
        description="HMAC-SHA256 signing secret in Secrets Manager. During rotation both the "
        "AWSCURRENT and the AWSPREVIOUS version are accepted.",
    )
    signature_scheme: Literal["relayflow", "github", "stripe"] = Field(
        "relayflow",
        description="relayflow: X-Relayflow-Signature t=<unix>,v1=<hex> over '<t>.<body>'; "
        "github: X-Hub-Signature-256 sha256=<hex> over the body; stripe: Stripe-Signature "
        "t=<unix>,v1=<hex> over '<t>.<body>'.",
    )
    signature_header: HeaderName | None = Field(
        None,
        description="github scheme only: the header that carries sha256=<hex> instead of "
        "X-Hub-Signature-256; preset for senders that sign like GitHub under another name: "
        "X-Webhook-Signature.",
    )
    replay_window_seconds: int = Field(
        300, ge=10, le=86_400, description="Max age of a timestamped signature."
    )
    transform: TemplateValue = Field(
        None,
        description="Trigger payload built from the delivery (trigger.body, trigger.headers, "
        "trigger.query); default: the body.",
    )
    max_body_bytes: int = Field(262_144, ge=1, le=6_291_456)
    rate_limit_per_minute: int = Field(600, ge=1, le=1_000_000)
    dedup_header: str | None = Field(
        None,
        description="Header whose value identifies a delivery; a repeat starts nothing. "
        "Default: X-Relayflow-Delivery, X-GitHub-Delivery, or Stripe's event id.",
    )
    respond: Literal["accepted", "sync"] = Field(
        "accepted", description="accepted: 202 with the run id; sync: wait for the run's output."
    )
    sync_timeout_seconds: int = Field(25, ge=1, le=28, description="Bounded wait for sync.")

    @model_validator(mode="after")
    def _header_for_github(self) -> WebhookTrigger:
        if self.signature_header is not None and self.signature_scheme != "github":
            raise PydanticCustomError(
                "signature-header",
                "signature_header renames the github scheme's header (sha256=<hex> over the "
                "body); the {scheme} scheme's header is fixed",
                {"scheme": self.signature_scheme},
            )
        return self


Trigger = Annotated[
    ManualTrigger | CronTrigger | AtTrigger | EventTrigger | WebhookTrigger,
    Field(discriminator="type"),
]


# --------------------------------------------------------------------------- workflow


#: Run outcomes a workflow can be notified of.
NotifyOn = Literal["failed", "timed_out", "aborted"]


class NotificationWebhook(DefinitionModel):
    """POST one signed JSON document per notification (``docs/reliability.md``)."""

    url: str = Field(
        max_length=2048,
        description="A literal http(s) URL; no placeholders (a run that ended has no state "
        "document to render them from).",
    )
    secret: SecretRef | None = Field(
        None, description="Signs the body: X-Relayflow-Signature: sha256=<hex HMAC>."
    )
    headers: dict[str, str] = Field(default_factory=dict, description="Extra request headers.")

    @field_validator("url")
    @classmethod
    def _literal_http_url(cls, value: str) -> str:
        if "{{" in value:
            raise PydanticCustomError(
                "notification-url",
                "a notification URL is literal: placeholders cannot be rendered once a run "
                "has ended",
            )
        try:
            parts = urlsplit(value.strip())
            host = parts.hostname
        except ValueError:
            host = None
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not host:
            raise PydanticCustomError(
                "url",
                "must be an http(s) URL with a host, e.g. https://hooks.example.com/relayflow",
            )
        return value.strip()


class NotificationEmail(DefinitionModel):
    """An email (SES) per notification."""

    to: list[EmailAddress] = Field(min_length=1, max_length=50, description="Recipients.")
    sender: EmailAddress | None = Field(
        None,
        alias="from",
        description="A verified SES identity; default: the deployment's notification sender.",
    )


class NotificationSettings(DefinitionModel):
    """Tell someone when a run of this workflow ends badly: a webhook, an email, or both.
    Sent by the recorder once per run end; not part of the compiled state machine."""

    on: list[NotifyOn] = Field(
        default_factory=lambda: ["failed", "timed_out"],
        min_length=1,
        description="Run outcomes that notify: failed, timed_out, aborted.",
    )
    webhook: NotificationWebhook | None = None
    email: NotificationEmail | None = None

    @model_validator(mode="after")
    def _a_channel(self) -> NotificationSettings:
        if self.webhook is None and self.email is None:
            raise PydanticCustomError(
                "notification-channel", "notifications need a webhook, an email or both"
            )
        return self


class ErrorSettings(DefinitionModel):
    on_failure: StepKey | None = Field(
        None, description="Default error route for steps that declare no on_failure."
    )


class Workflow(DefinitionModel, EngineSetting, InputSchemaSetting):
    """A workflow definition."""

    id: str = Field(pattern=WORKFLOW_ID_PATTERN, max_length=64, description="Stable identifier.")
    requires: str | None = Field(
        None,
        max_length=100,
        description="Engine-version guard: a version specifier (PEP 440) that the Relayflow "
        'engine must satisfy, e.g. ">=0.3"; validation refuses the definition otherwise.',
    )
    name: str | None = Field(None, max_length=200)
    description: str | None = Field(None, max_length=4000)
    start: StepKey = Field(description="Key of the first step.")
    steps: dict[str, Step] = Field(min_length=1, description="Steps by key.")
    triggers: list[Trigger] = Field(default_factory=list)
    run_timeout_seconds: int = Field(
        86_400, ge=1, le=31_536_000, description="Fail the run with States.Timeout after this long."
    )
    max_steps_per_run: int = Field(
        1000, ge=1, le=100_000, description="Bound on steps executed inside cycles."
    )
    errors: ErrorSettings = Field(default_factory=ErrorSettings)
    defaults: StepDefaults = Field(default_factory=StepDefaults, description=StepDefaults.HELP)
    breaker: BreakerSettings | None = Field(
        None,
        description="Workflow circuit breaker: consecutive failed runs open it; while open, API "
        "starts get 409 and scheduled or event runs are skipped and recorded.",
    )
    notifications: NotificationSettings | None = Field(
        None, description="Webhook and/or email when a run fails, times out or is aborted."
    )
    events: EventSettings = Field(
        default_factory=EventSettings, description="Per-step lifecycle events (opt-in)."
    )
    http_tools: dict[str, HttpTool] = Field(
        default_factory=dict, description="HTTP APIs that tool steps call as http.<name>."
    )
    outputs: list[StepKey] = Field(
        default_factory=list,
        description="Steps whose outputs the run's final output keeps (if they ran), besides "
        "the step the run ended on. Every other output leaves the state document once no "
        "later step reads it; the run's timeline still shows it.",
    )

    @field_validator("requires")
    @classmethod
    def _version_specifier(cls, value: str | None) -> str | None:
        from relayflow.engine import BadSpecifier, parse_requirement

        if value is None:
            return None
        try:
            parse_requirement(value)
        except BadSpecifier as exc:
            raise PydanticCustomError("version-specifier", str(exc)) from exc
        return value.strip()

    # Run admission (docs/flow-control.md): what a trigger does when it asks for a run.
    singleton: SingletonSettings | None = Field(None, description="One running run per key.")
    concurrency: ConcurrencySettings | None = Field(
        None, description="Running runs per key at most; the rest queue, first in first out."
    )
    debounce: DebounceSettings | None = Field(
        None, description="Collapse a burst of triggers per key into one run (the last one)."
    )
    batch: BatchSettings | None = Field(
        None, description="One run per up to max_size event or webhook triggers of a key."
    )
    cancel_on: list[CancelOn] = Field(
        default_factory=list,
        max_length=10,
        description="Events on the Relayflow bus that cancel the running runs they match.",
    )

    @model_validator(mode="after")
    def _one_rule_of_each_kind(self) -> Workflow:
        if self.singleton is not None and self.concurrency is not None:
            raise ValueError(
                "singleton and concurrency exclude each other (singleton is a limit of 1)"
            )
        if self.debounce is not None and self.batch is not None:
            raise ValueError(
                "debounce and batch exclude each other: both fold triggers into one run"
            )
        return self
