"""The step models of the definition format: one per step type, the ``Step`` union of them,
the step-level policies and the HTTP tool declarations the steps use.

Import them from :mod:`relayflow.definition.models`, which holds the workflow-level models.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from relayflow.definition.compensation import Compensable
from relayflow.definition.errors_model import OnError
from relayflow.definition.for_each import ForEachScale
from relayflow.definition.model_fields import (
    DefinitionModel,
    DryRunOutput,
    HeaderName,
    StepKey,
    Template,
    TemplateValue,
)
from relayflow.definition.policies import FAIL_WHEN_HELP, SETTLE_HELP, RetrySetting, check_settle

# --------------------------------------------------------------------------- policies


class Concurrency(DefinitionModel):
    """At most ``limit`` executions of this step at once, optionally per key (like Inngest's
    concurrency key): ``key: "{{ trigger.customer_id }}"`` limits each customer separately.
    Held as leases in DynamoDB that expire if a function dies."""

    limit: int = Field(ge=1, le=10_000)
    key: Template | None = Field(None, description="Template naming the group the limit is per.")


class RateLimit(DefinitionModel):
    """At most ``limit`` starts of this step in any ``window_seconds`` (a sliding window)."""

    limit: int = Field(ge=1, le=1_000_000)
    window_seconds: int = Field(60, ge=1, le=86_400)
    key: Template | None = Field(None, description="Template naming the group the limit is per.")


class BreakerSettings(DefinitionModel):
    """A circuit breaker: ``failure_threshold`` consecutive non-transient failures open it;
    after ``cooldown_seconds`` one trial is let through (half-open); a success closes it."""

    failure_threshold: int = Field(5, ge=1, le=1000)
    cooldown_seconds: int = Field(60, ge=1, le=86_400)


class _StepBase(DefinitionModel):
    name: str | None = Field(None, max_length=200, description="Display name.")
    description: str | None = Field(None, max_length=2000)
    on_failure: StepKey | None = Field(
        None, description="Step to run when this step fails (after retries); the error is at error."
    )
    retry: RetrySetting = Field(None, description="Retry policy; none: one attempt only.")
    on_error: OnError | None = Field(
        None, description="park or continue when the step fails (docs/reliability.md)."
    )
    timeout_seconds: int | None = Field(
        None, ge=1, le=31_536_000, description="Fail the step with States.Timeout after this long."
    )
    concurrency: Concurrency | None = Field(
        None, description="Flow control: executions of this step at once."
    )
    rate_limit: RateLimit | None = Field(None, description="Flow control: starts per window.")


class _Routed(_StepBase):
    on_success: StepKey | None = Field(
        None, description="Next step; without it the run (or branch) ends after this step."
    )


# --------------------------------------------------------------------------- secrets, HTTP tools


class SecretRef(DefinitionModel):
    """A secret of the workflow's tenant, held in AWS Secrets Manager or SSM Parameter Store
    (SecureString), read at run time through Powertools parameters; the value never appears
    in a definition, the ASL or a log line. ``field`` picks one key of a JSON secret."""

    name: str = Field(
        min_length=1,
        max_length=512,
        description="The secret's name in the tenant's folder: stripe is read as "
        "<prefix><tenant>/stripe (SSM: /<prefix><tenant>/stripe). No .., no ARN.",
    )
    source: Literal["secretsmanager", "ssm"] = "secretsmanager"
    field: str | None = Field(None, description="Key inside a JSON secret.")

    @field_validator("name")
    @classmethod
    def _inside_the_tenant(cls, value: str) -> str:
        from relayflow.tenancy import secret_name_problem

        # A leading / is the absolute form of the tenant's own folder (/relayflow/<stage>/acme/…):
        # whether it is the tenant's is checked where the tenant is known.
        problem = secret_name_problem(value[1:] if value.startswith("/") else value)
        if problem is not None:
            raise PydanticCustomError(
                "secret-name", "secret {name}: {problem}", {"name": repr(value), "problem": problem}
            )
        return value


class BearerAuth(DefinitionModel):
    type: Literal["bearer"]
    token: SecretRef


class BasicAuth(DefinitionModel):
    type: Literal["basic"]
    username: str
    password: SecretRef


class ApiKeyAuth(DefinitionModel):
    type: Literal["api_key"]
    header: str = Field("X-Api-Key", description="Header that carries the key.")
    key: SecretRef


class HmacAuth(DefinitionModel):
    type: Literal["hmac"]
    header: str = Field("X-Signature", description="Header that carries sha256=<hex>.")
    secret: SecretRef


HttpAuth = Annotated[BearerAuth | BasicAuth | ApiKeyAuth | HmacAuth, Field(discriminator="type")]


class HttpOperation(DefinitionModel):
    """A named call of an HTTP tool. Its templates see the state document and ``args``."""

    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    path: Template = Field("/", description="Appended to base_url, e.g. /invoices/{{ args.id }}.")
    query: dict[str, TemplateValue] = Field(default_factory=dict)
    headers: dict[str, Template] = Field(default_factory=dict)
    body: TemplateValue = None


class HttpTool(DefinitionModel):
    """An HTTP API declared once and called by tool steps as ``http.<name>[.<operation>]``."""

    base_url: str = Field(pattern=r"^https?://", description="Scheme, host and optional base path.")
    headers: dict[str, str] = Field(default_factory=dict, description="Sent on every call.")
    auth: HttpAuth | None = None
    timeout_seconds: float = Field(30.0, gt=0, le=900)
    operations: dict[str, HttpOperation] = Field(default_factory=dict)


# --------------------------------------------------------------------------- native steps


class NoopStep(_Routed):
    """Does nothing; useful as a join point or placeholder in a graph."""

    type: Literal["noop"]


class ConditionStep(_StepBase):
    """Evaluates a CEL expression and routes to ``on_true`` or ``on_false``.

    A missing branch ends the run (or branch) successfully.
    """

    type: Literal["condition"]
    expression: str = Field(description="CEL expression that yields a bool.", min_length=1)
    on_true: StepKey | None = None
    on_false: StepKey | None = None

    @model_validator(mode="after")
    def _one_branch(self) -> ConditionStep:
        if self.on_true is None and self.on_false is None:
            raise ValueError("a condition needs on_true, on_false or both")
        return self


class TransformStep(_Routed):
    """Builds its output from templates over the state document."""

    type: Literal["transform"]
    mapping: TemplateValue = Field(description="The output; strings may hold placeholders.")


#: The longest Wait Step Functions accepts (``Seconds`` of a Wait state).
MAX_DELAY_SECONDS = 99_999_999


class DelayStep(_Routed):
    """Waits for a number of seconds or until a timestamp."""

    type: Literal["delay"]
    seconds: int | Template | None = Field(
        None,
        description=f"Seconds to wait (0 to {MAX_DELAY_SECONDS:,}), or a placeholder that "
        "yields them. Neither seconds nor until: the workflow's defaults.delay_seconds.",
    )
    until: Template | None = Field(
        None,
        description="RFC 3339 timestamp with a zone (or a placeholder yielding one) to wait until.",
    )

    @field_validator("seconds", mode="before")
    @classmethod
    def _wait_range(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise PydanticCustomError(
                "delay_seconds", "seconds must be a whole number or a placeholder, not a boolean"
            )
        if isinstance(value, int) and not 0 <= value <= MAX_DELAY_SECONDS:
            raise PydanticCustomError(
                "delay_seconds",
                "seconds must be between 0 and {limit} (the longest Wait Step Functions "
                "accepts); wait longer with an until timestamp",
                {"limit": f"{MAX_DELAY_SECONDS:,}"},
            )
        return value

    @model_validator(mode="after")
    def _at_most_one(self) -> DelayStep:
        # Neither: the workflow's defaults.delay_seconds (relayflow.definition.effective).
        if self.seconds is not None and self.until is not None:
            raise ValueError("a delay takes seconds or until, not both")
        return self


class ParallelStep(_Routed):
    """Runs several branches at once. Each branch starts at one of ``branches`` and follows
    that step's routes; the branch steps' outputs join the state document when all finish."""

    type: Literal["parallel"]
    branches: list[StepKey] = Field(
        min_length=1, max_length=100, description="First step of each branch."
    )
    settle: Literal["fail_fast", "all"] = Field("fail_fast", description=SETTLE_HELP)
    fail_when: Literal["never", "any"] | None = Field(None, description=FAIL_WHEN_HELP)

    @model_validator(mode="after")
    def _settles(self) -> ParallelStep:
        return check_settle(self)  # type: ignore[no-any-return]


class ForEachStep(_Routed, ForEachScale):
    """Runs ``step`` once per item of ``items`` or ``items_from`` (a Map state). The output is
    the list of per-item results in item order, or (distributed) where they were written."""

    type: Literal["for_each"]
    items: Template | None = Field(None, description="A list placeholder: {{ trigger.orders }}.")
    step: StepKey = Field(description="The step run for each item; it sees item and index.")
    max_items: int = Field(1000, ge=1, le=40_000, description="Fail beyond this many items.")
    max_concurrency: int = Field(
        0, ge=0, le=1000, description="Items in flight at once; 0 = no limit."
    )
    on_item_failure: Literal["fail", "continue"] = Field(
        "fail",
        description="fail: one failed item fails the step. continue: record the error and go on.",
    )


# --------------------------------------------------------------------------- Lambda steps


class ToolStep(_Routed, Compensable):
    """Calls a catalogue tool: an AWS action (``aws.dynamodb.put_item``) or an HTTP tool of
    ``http_tools`` (``http.billing``, or its operation ``http.billing.create_invoice``)."""

    type: Literal["tool"]
    tool: str = Field(
        pattern=r"^(aws|http)\.[a-z0-9_-]+(\.[a-z0-9_]+)?$",
        description="Catalogue name, e.g. aws.dynamodb.put_item or http.billing.create_invoice.",
    )
    args: TemplateValue = Field(default_factory=dict, description="Templated arguments.")
    breaker: BreakerSettings | None = Field(
        default_factory=BreakerSettings,
        description="Circuit breaker for this tool (per tenant, shared by every workflow that "
        "calls it); null turns it off.",
    )
    dry_run: Literal["simulate", "read"] | None = Field(
        None,
        description="In a dry run: simulate (default: record the call, do not make it) or read "
        "(make it: the author vouches it only reads; AWS tools: get_item, query, get_object).",
    )
    dry_run_output: DryRunOutput = None


class AgentStep(_Routed, Compensable):
    """A model in a tool loop (``docs/ai-steps.md``): it reads ``prompt``, may call the
    permitted ``tools`` (gating is enforced in code, never by the prompt), and ends with an
    answer. With ``outcomes`` the answer picks one of their names and the run routes on it;
    ``inherit`` sends that outcome to the step's failure handling."""

    type: Literal["agent"]
    agent_id: str | None = Field(
        None,
        description="Not supported: a stored agent of the seed engine. Refused by validation "
        "(not-applicable); define the agent inline (model, prompt, system, tools).",
    )
    prompt: Template
    system: Template | None = None
    model: str | None = Field(
        None,
        description="<provider>:<model id>: bedrock:…, anthropic:…, openai:…, or "
        "scripted:<fixture> (replays a fixture; demo and tests).",
    )
    base_url: str | None = Field(
        None,
        pattern=r"^https?://",
        description="anthropic/openai: the API's base URL (e.g. a self-hosted "
        "OpenAI-compatible server).",
    )
    api_key: SecretRef | None = Field(None, description="anthropic/openai: the API key.")
    max_turns: int = Field(5, ge=1, le=50, description="Model turns before AgentMaxTurns.")
    max_tokens: int | None = Field(None, ge=1, description="Output tokens per model turn.")
    temperature: float | None = Field(None, ge=0, le=2)
    token_budget: int | None = Field(
        None, ge=1, description="Input + output tokens over all turns before AgentTokenBudget."
    )
    tools: list[str] | None = Field(
        None, description="Tools the agent knows: aws.…, http.<name>[.<op>], workflow.<id>."
    )
    allowed_tools: list[str] | None = Field(
        None, description="Only these may run (and, without tools, the tools it knows)."
    )
    blocked_tools: list[str] | None = Field(None, description="These never run.")
    require_approval_tools: list[str] | None = Field(
        None,
        description="A call to one of these waits for a person's approval (a compiled "
        "approval state); rejected calls never run.",
    )
    approval_channels: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Notification channels of those approvals (like an approval step's "
        "notification_channels; guest links included).",
    )
    output_schema: dict[str, Any] | None = Field(
        None, description="JSON Schema of the answer's response; one corrective turn if wrong."
    )
    outcomes: dict[str, StepKey] | None = Field(
        None,
        description="Outcome name → step (or inherit: the step's failure handling); the "
        "answer must pick one.",
    )
    breaker: BreakerSettings | None = Field(
        default_factory=BreakerSettings,
        description="Circuit breaker for each tool the agent calls and for its model.",
    )


class LlmBatchStep(_Routed):
    """One prompt, or one per item, run as a provider batch job (about half the price, for
    work that can wait); the compiled state machine polls it (``docs/ai-steps.md``)."""

    type: Literal["llm_batch"]
    model: str | None = Field(
        None, description="<provider>:<model id>: anthropic:…, bedrock:… or scripted:<fixture>."
    )
    prompt: Template | None = Field(None, description="One prompt (instead of items).")
    items: Template | None = Field(None, description="A placeholder yielding the list of items.")
    prompt_template: Template | None = Field(
        None, description="The prompt per item; it sees item and index."
    )
    system: Template | None = None
    max_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    base_url: str | None = Field(None, pattern=r"^https?://")
    api_key: SecretRef | None = None
    poll_interval_seconds: int = Field(
        60, ge=1, le=86_400, description="Wait between status checks (a compiled Wait)."
    )
    deadline_seconds: int = Field(
        86_400, ge=60, le=604_800, description="Relayflow.BatchDeadline when not ended by then."
    )
    below_minimum: Literal["fail", "one_by_one"] = Field(
        "fail",
        description="Bedrock: fewer items than the account's minimum records per batch job: "
        "fail (Relayflow.BatchTooSmall) or run them one by one through Converse.",
    )
    dry_run_output: DryRunOutput = None

    @model_validator(mode="after")
    def _one_mode(self) -> LlmBatchStep:
        per_item = self.items is not None or self.prompt_template is not None
        if (self.prompt is None) == (not per_item):
            raise ValueError("an llm_batch needs either prompt, or items and prompt_template")
        if per_item and (self.items is None or self.prompt_template is None):
            raise ValueError("items and prompt_template go together")
        return self


class SubWorkflowStep(_Routed):
    type: Literal["sub_workflow"]
    workflow_id: str = Field(
        pattern=r"^([a-z0-9][a-z0-9_-]*|.*\{\{.*\}\}.*)$",
        max_length=200,
        description="The child workflow's id, or a template rendering it at run time (e.g. "
        "'{{ trigger.kind }}-handler'): always a workflow of the run's own tenant.",
    )
    version: int | None = Field(None, ge=1)
    input: TemplateValue = Field(default_factory=dict)


class CodeStep(_Routed, Compensable):
    """Runs user Python in a separate, limited process; it sees ``steps``, ``trigger`` and
    ``input`` and its return value (JSON) is the output."""

    type: Literal["code"]
    language: Literal["python"] = "python"
    code: str = Field(min_length=1, max_length=100_000)
    input: TemplateValue = Field(None, description="Templated value the code sees as input.")
    cpu_seconds: int | None = Field(None, ge=1, le=60, description="CPU-time limit.")
    memory_mb: int | None = Field(None, ge=32, le=2048, description="Address-space limit.")
    wall_seconds: float | None = Field(None, gt=0, le=300, description="Wall-clock limit.")


class WebhookOutStep(_Routed, Compensable):
    """Sends an HTTP request; signs the exact body when a secret is named."""

    type: Literal["webhook_out"]
    url: Template
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[str, Template] = Field(default_factory=dict)
    body: TemplateValue = None
    secret: SecretRef | None = Field(
        None, description="Signing secret; adds X-Relayflow-Signature: sha256=<hex HMAC of body>."
    )
    signature_header: HeaderName | None = Field(
        None,
        description="With secret: the header the sha256=<hex> signature goes in (default "
        "X-Relayflow-Signature; X-Webhook-Signature for receivers of that GitHub-style preset).",
    )
    request_timeout_seconds: float = Field(30.0, gt=0, le=900)
    dry_run_output: DryRunOutput = None


class ApprovalStep(_StepBase):
    """Pauses the run until a person picks one of ``options`` (a callback Task). The request
    is stored for the tenant; ``GET /approvals`` lists it and ``POST /approvals/{id}/respond``
    decides it. ``timeout_seconds`` is the expiry; ``timeout_action`` says what expiry does."""

    type: Literal["approval"]
    title: Template = Field(description="Shown to the approver (templated).")
    prompt: Template | None = Field(None, description="What the approver is asked.")
    options: list[str] = Field(
        default_factory=lambda: ["approve", "reject"],
        min_length=1,
        max_length=20,
        description="The choices; 'approve' (or else the first option) counts as approved.",
    )
    form_schema: dict[str, Any] | None = Field(
        None, description="JSON Schema the response's data must satisfy."
    )
    assigned_to: str | None = Field(None, max_length=200)
    assigned_role: str | None = Field(None, max_length=200)
    timeout_action: Literal["fail", "approve", "reject", "route"] = Field(
        "fail",
        description="On expiry: fail the step (States.Timeout), decide approve or reject, or "
        "take on_timeout (route).",
    )
    on_timeout: StepKey | None = None
    on_approve: StepKey | None = None
    on_reject: StepKey | None = None
    branches: dict[str, StepKey] | None = Field(
        None, description="One route per option (option → step); takes precedence."
    )
    notification_channels: list[dict[str, Any]] = Field(default_factory=list)


class CustomStep(_StepBase, Compensable):
    """POSTs the step context to a user URL. A JSON answer ``{"branch": "<name>"}`` routes to
    that declared branch; any other answer (or an unknown branch) takes ``on_success``."""

    type: Literal["custom"]
    url: Template
    payload_config: dict[str, Any] = Field(default_factory=dict)
    headers: dict[str, Template] = Field(default_factory=dict)
    secret: SecretRef | None = Field(None, description="Signs the request like webhook_out.")
    branches: dict[str, StepKey] = Field(default_factory=dict)
    on_success: StepKey | None = None
    request_timeout_seconds: float = Field(30.0, gt=0, le=900)
    dry_run_output: DryRunOutput = None


class WaitpointStep(_Routed):
    """Pauses the run until another system completes (or fails) the waitpoint through
    ``POST /waitpoints/{id}/complete`` or ``/fail``; the completion data is the output."""

    type: Literal["waitpoint"]
    label: str | None = Field(None, max_length=200)
    idempotency_key: Template | None = Field(
        None,
        description="A second waitpoint with the same rendered key in the tenant reuses the "
        "first one's id (its token then resumes the newer run).",
    )
    on_timeout: StepKey | None = Field(
        None, description="Where an expired waitpoint goes; without it the step fails."
    )


class WaitForEventStep(_Routed):
    """Pauses the run until an event on the Relayflow bus of the run's tenant matches; the
    event (shaped like an event trigger) is the step's output. See docs/flow-control.md."""

    type: Literal["wait_for_event"]
    event: str = Field(min_length=1, max_length=256, description="The event's detail-type.")
    source: str | None = Field(None, max_length=256, description="Only events of this source.")
    match: str | None = Field(
        None,
        max_length=4000,
        description="CEL over the run's data (trigger, steps, run) and the event (event); "
        "absent: the first event of that detail-type.",
    )
    on_timeout: StepKey | None = Field(
        None,
        description="Where the run goes when timeout_seconds pass without a matching event; "
        "without it the step fails with Relayflow.WaitTimeout.",
    )

    @field_validator("match")
    @classmethod
    def _match_parses(cls, value: str | None) -> str | None:
        from relayflow.expressions.cel import ExpressionSyntaxError, check_expression

        if value is not None:
            try:
                check_expression(value)
            except ExpressionSyntaxError as exc:
                raise ValueError(f"match is not valid CEL: {exc}") from exc
        return value


Step = Annotated[
    NoopStep
    | ConditionStep
    | TransformStep
    | DelayStep
    | ParallelStep
    | ForEachStep
    | ToolStep
    | AgentStep
    | LlmBatchStep
    | SubWorkflowStep
    | CodeStep
    | WebhookOutStep
    | ApprovalStep
    | CustomStep
    | WaitpointStep
    | WaitForEventStep,
    Field(discriminator="type"),
]

STEP_TYPES: tuple[str, ...] = (
    "tool",
    "condition",
    "transform",
    "delay",
    "agent",
    "llm_batch",
    "sub_workflow",
    "parallel",
    "for_each",
    "code",
    "webhook_out",
    "noop",
    "approval",
    "custom",
    "waitpoint",
    "wait_for_event",
)

#: Step types this build can run (every one, today). The others would parse, and validation
#: refuses them by name.
AVAILABLE_STEP_TYPES = frozenset(STEP_TYPES)

# --------------------------------------------------------------------------- compensation


def compensation_call(step: Any, steps: Any) -> Any:
    """The compensation of ``step`` as a step model: the referenced step's, or the inline call
    parsed as its step type's model. ``None`` when the step declares none. ``steps``: the
    workflow's steps by key."""
    compensate = getattr(step, "compensate", None)
    if compensate is None or isinstance(compensate, str):
        return None if compensate is None else steps[compensate]
    model = {"tool": ToolStep, "webhook_out": WebhookOutStep, "custom": CustomStep}
    return model[compensate.type].model_validate(compensate.model_dump(mode="json"))
