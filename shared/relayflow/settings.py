"""Settings of the deployed functions and the local runtime, read once from the environment.

Logic never reads ``os.environ``; it calls :func:`get_settings`. ``template.yaml`` sets these
variables on each function; the local runtime and tests override them with
:func:`override_settings`.

Each field ``<name>`` is read from ``RELAYFLOW_<NAME>`` (any case), or from its validation
alias (``AWS_REGION``); a blank variable is not set; a list or mapping is JSON. That is what
``pydantic_settings`` did here, read by :func:`environment_values` instead: importing
``pydantic_settings`` cost every function a fifth of ``import boto3`` at each cold start, and
it imports ``asyncio``.
"""

from __future__ import annotations

import json
import os
import types
import typing
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.fields import FieldInfo

#: Prefix of the variable of each field without a validation alias.
ENV_PREFIX = "RELAYFLOW_"

#: What ``sam local invoke`` puts in a variable whose template value it cannot resolve: the
#: logical id a ``!Ref`` names, or for ``!GetAtt <id>.Arn`` a Lambda-shaped ARN ending in
#: ``:function:<id>`` (a ``!Sub`` it cannot resolve becomes a blank, which is ignored too).
#: Such a value names nothing that exists, so the setting keeps its default (the local
#: runtime's name) instead; ``events/env.json`` sets the real local values.
SAM_LOCAL_PLACEHOLDERS: dict[str, str] = {
    "table_name": "RelayflowTable",
    "payload_bucket": "PayloadBucket",
    "event_bus_name": "EventBus",
    "schedule_group_name": "ScheduleGroup",
    "approval_signing_secret": "ApprovalSigningSecret",
    "state_machine_role_arn": "StateMachineRole",
    "state_machine_log_group_arn": "StateMachineLogGroup",
    "step_events_log_group_arn": "StepEventsLogGroup",
    "tenant_state_machine_policy_arn": "TenantStateMachinePolicy",
    "tenant_step_role_arn": "TenantStepRole",
    "scheduler_role_arn": "SchedulerRole",
    "trigger_function_arn": "TriggerFunction",
    "trigger_dead_letter_queue_arn": "TriggerDeadLetterQueue",
    "bedrock_batch_role_arn": "BedrockBatchRole",
}


def default_secret_prefix(stage: str) -> str:
    """``relayflow/<stage>/``: where a stage keeps its tenants' secrets unless the stack's
    ``SecretNamePrefix`` says otherwise."""
    return f"relayflow/{stage}/"


def _is_placeholder(value: Any, logical_id: str) -> bool:
    return isinstance(value, str) and (
        value == logical_id or value.endswith(f":function:{logical_id}")
    )


def _is_json(field: FieldInfo) -> bool:
    """Whether a variable for ``field`` holds JSON (a list, a mapping or a model)."""
    annotation = field.annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next((a for a in typing.get_args(annotation) if a is not type(None)), None)
    origin = typing.get_origin(annotation) or annotation
    return origin in (list, dict, set, frozenset, tuple) or (
        isinstance(origin, type) and issubclass(origin, BaseModel)
    )


def environment_values(model: type[BaseModel], environ: Mapping[str, str]) -> dict[str, Any]:
    """The values ``environ`` sets for ``model``'s fields, keyed as the model validates them
    (by validation alias, else by name). A blank variable (what SAM gives an unresolvable
    value, or an unset optional parameter) means "not set": the default applies, never a
    parse error. A variable that should be JSON and is not is a ``ValueError`` naming it."""
    by_lower = {name.lower(): value for name, value in environ.items()}
    values: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        alias = field.validation_alias if isinstance(field.validation_alias, str) else None
        variable = alias or f"{ENV_PREFIX}{name}"
        raw = by_lower.get(variable.lower())
        if raw is None or raw == "":
            continue
        if _is_json(field):
            try:
                value: Any = json.loads(raw)
            except ValueError as exc:
                raise ValueError(f"{variable.upper()} ({name}) is not JSON: {exc}") from None
        else:
            value = raw
        values[alias or name] = value
    return values


class Settings(BaseModel):
    model_config = ConfigDict(extra="ignore")

    def __init__(self, **values: Any) -> None:
        """The settings the environment sets, with ``values`` over them."""
        super().__init__(**{**environment_values(type(self), os.environ), **values})

    stage: str = "local"
    region: str = Field("us-east-1", validation_alias="AWS_REGION")
    table_name: str = Field("relayflow", description="The DynamoDB table.")
    payload_bucket: str = Field("relayflow-payloads", description="Where large outputs go.")
    event_bus_name: str = Field("relayflow", description="The Relayflow EventBridge bus.")
    offload_threshold_bytes: int = Field(
        200_000,
        description="A step output (or the document it would join) above this goes to S3.",
    )
    http_timeout_seconds: float = Field(30.0, description="Default outbound HTTP timeout.")
    step_result_ttl_days: int = Field(
        30,
        ge=1,
        description="How long a side-effecting step's recorded result is kept: a duplicate "
        "invocation or a restart of the run within this time replays it instead of acting.",
    )
    ssrf_allow: list[str] = Field(
        default_factory=list,
        description="Hosts or CIDR ranges the SSRF guard lets through (local development and "
        "tests only; never set in production).",
    )
    state_machine_role_arn: str = Field(
        "arn:aws:iam::123456789012:role/relayflow-state-machine",
        description="Execution role of the state machines the control plane creates.",
    )
    schedule_group_name: str = Field("relayflow", description="EventBridge Scheduler group.")
    scheduler_role_arn: str = Field(
        "arn:aws:iam::123456789012:role/relayflow-scheduler",
        description="Role EventBridge Scheduler assumes to invoke the trigger function.",
    )
    trigger_function_arn: str = Field(
        "arn:aws:lambda:us-east-1:123456789012:function:relayflow-trigger",
        description="Target of schedules and event subscriptions.",
    )
    state_machine_log_group_arn: str | None = Field(
        None, description="Log group the control plane's state machines log errors to."
    )
    tenant_state_machine_policy_arn: str | None = Field(
        None,
        description="TenantStateMachinePolicy: the one policy (and boundary) of the per-tenant "
        "roles that machines with a templated sub_workflow target run under; unset: those "
        "machines run under the shared state_machine_role_arn.",
    )
    tenant_step_role_arn: str | None = Field(
        None,
        description="TenantStepRole: the role acting steps assume, with the session tag "
        "relayflow-tenant=<the run's tenant>, to call AWS and read secrets for a tenant "
        "(relayflow.adapters.tenant_aws); unset (the local runtime): the function's own "
        "credentials, with the same refusals enforced in code.",
    )
    secret_name_prefix: str | None = Field(
        None,
        description="SecretNamePrefix: a tenant's secrets are <prefix><tenant>/<name> in "
        "Secrets Manager and /<prefix><tenant>/<name> in SSM Parameter Store; a workflow "
        "names them by <name> (relayflow.tools.secrets). Unset: relayflow/<stage>/ "
        "(secret_prefix), so two stages in one account never share a tenant's secrets.",
    )
    step_events_log_group_arn: str | None = Field(
        "arn:aws:logs:us-east-1:123456789012:log-group:/aws/vendedlogs/states/relayflow-local-steps:*",
        description="Log group the state machines of workflows with events.steps log every "
        "event to (level ALL); its subscription feeds the step-events function. The default "
        "names the local runtime's stand-in (relayflow.local.step_logs); template.yaml sets "
        "the stack's.",
    )
    function_arns: dict[str, str] = Field(
        default_factory=dict,
        description="Step function ARNs by kind (condition, transform …) the compiler calls; "
        "an empty map uses relayflow.naming's defaults, which the local runtime serves.",
    )
    shared_tool_resources: list[str] = Field(
        default_factory=list,
        description="SharedToolResources: ARNs of tool resources an operator shares between "
        "tenants on purpose (a JSON list); every other table, bucket, queue, topic, bus, "
        "function and state machine a step reaches is scoped to its tenant "
        "(relayflow.tools.tenant_data).",
    )
    notification_sender: str | None = Field(
        None,
        description="Verified SES identity failure-notification emails come from when a "
        "workflow's notifications.email names no sender.",
    )
    approval_signing_secret: str | None = Field(
        None,
        description="Secrets Manager secret whose value is the key guest approval links are "
        "signed with; unset: relayflow-internal/<stage>/approval-signing-key. Keep it outside "
        "the prefix tool steps may read.",
    )
    public_base_url: str | None = Field(
        None,
        description="Where the API is reached from outside (guest approval links start with "
        "it); unset: notifications carry no guest links.",
    )
    public_base_url_parameter: str | None = Field(
        None,
        description="SSM parameter holding public_base_url, read when public_base_url is "
        "unset (the stack writes the API's URL there: a function cannot name the API it is "
        "part of without a dependency cycle).",
    )
    trigger_dead_letter_queue_arn: str | None = Field(
        None,
        description="SQS queue that schedules and event-rule targets the control plane creates "
        "send what they could not deliver to the trigger function (DeadLetterConfig); unset: "
        "none (the local runtime).",
    )
    code_cpu_seconds: int = 5
    code_memory_mb: int = 256
    code_wall_seconds: float = 10.0
    code_output_bytes: int = 100_000
    bedrock_batch_role_arn: str | None = Field(
        None,
        description="The service role Bedrock batch inference jobs (llm_batch) run with: it "
        "reads and writes the payload bucket's payloads/batch/ objects.",
    )
    ai_fixtures_dir: str | None = Field(
        None,
        description="Directory searched first for scripted-model fixtures "
        "(model: scripted:<fixture>); the fixtures shipped in relayflow/ai/fixtures follow.",
    )

    @property
    def secret_prefix(self) -> str:
        """The prefix of every tenant's secret folder: ``secret_name_prefix``, or
        ``relayflow/<stage>/`` (the template's default for an empty ``SecretNamePrefix``)."""
        return self.secret_name_prefix or default_secret_prefix(self.stage)

    @model_validator(mode="before")
    @classmethod
    def _drop_sam_local_placeholders(cls, data: Any) -> Any:
        """Unresolved template references (see :data:`SAM_LOCAL_PLACEHOLDERS`) keep the
        default rather than naming a resource that does not exist."""
        if not isinstance(data, dict):
            return data
        return {
            key: value
            for key, value in data.items()
            if not (
                key in SAM_LOCAL_PLACEHOLDERS
                and _is_placeholder(value, SAM_LOCAL_PLACEHOLDERS[key])
            )
        }


_overrides: list[Settings] = []


@lru_cache(maxsize=1)
def _from_environment() -> Settings:
    return Settings()


def get_settings() -> Settings:
    """The process's settings: read from the environment once per cold start, unless a
    :func:`override_settings` block is active."""
    return _overrides[-1] if _overrides else _from_environment()


@contextmanager
def override_settings(**values: Any) -> Iterator[Settings]:
    """Temporarily replace settings fields (tests, the local runtime)."""
    patched = get_settings().model_copy(update=values)
    _overrides.append(patched)
    try:
        yield patched
    finally:
        _overrides.remove(patched)
