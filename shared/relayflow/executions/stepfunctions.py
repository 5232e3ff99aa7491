"""The Step Functions port: state machines, versions, the ``live`` alias and executions.
The only module of the control plane (and of what it builds on) that talks to the Step
Functions API; every ``ClientError`` becomes one of the exceptions below."""

from __future__ import annotations

import hashlib
from typing import Any

from relayflow.adapters.port import THROTTLING_CODES, AwsPort

#: The alias every workflow's state machine carries; it points at the live version.
LIVE_ALIAS = "live"
#: Step Functions' limit on state machine names.
MAX_NAME = 80


class StepFunctionsError(Exception):
    """Step Functions refused or failed a request."""


class Throttled(StepFunctionsError):
    """Step Functions throttled the request even after the client's retries."""


class DefinitionRejected(StepFunctionsError):
    """Step Functions refused the compiled definition (size, or a rule it enforces)."""


class ExecutionExists(StepFunctionsError):
    """An execution of that name exists (with another input, or already finished)."""


class ExecutionMissing(StepFunctionsError):
    """No such execution (never started, or its history has expired)."""


class MachineExists(StepFunctionsError):
    """A state machine of that name exists with another configuration."""


class ResourceMissing(StepFunctionsError):
    """No such alias or version."""


class RoleNotAssumable(StepFunctionsError):
    """Step Functions cannot assume the execution role (yet: IAM is eventually consistent,
    and a role created a moment ago may not be usable for a few seconds)."""


#: Pauses between tries of a create or update whose role Step Functions cannot assume yet.
ROLE_RETRY_SECONDS = (1.0, 2.0, 4.0, 4.0)


def logging_configuration(*, step_events: bool = False, express: bool = False) -> dict[str, Any]:
    """``create_state_machine``'s logging arguments, never with step payloads (which may hold
    personal data). By default errors only, to the stack's log group (the execution history
    shows the rest). Express has no execution history, so its log is every state's entry and
    exit (``ALL``): the only record of its steps besides their own (docs/engines.md). With
    ``step_events`` (a workflow's ``events: {steps: true}``) every event goes to the
    step-events log group, whose subscription filter turns them into ``relayflow.step.*``
    events. Nothing when no log group is configured (local runs)."""
    from relayflow.settings import get_settings

    settings = get_settings()
    level, group = "ALL" if express else "ERROR", settings.state_machine_log_group_arn
    if step_events and settings.step_events_log_group_arn:
        level, group = "ALL", settings.step_events_log_group_arn
    if not group:
        return {}
    return {
        "loggingConfiguration": {
            "level": level,
            "includeExecutionData": False,
            "destinations": [{"cloudWatchLogsLogGroup": {"logGroupArn": group}}],
        }
    }


def state_machine_name(stage: str, tenant: str, workflow_id: str) -> str:
    """``relayflow-<stage>-<tenant>_<workflow_id>``. Tenant ids hold no ``_``, so the first
    ``_`` ends the tenant and two (tenant, workflow) pairs never share a machine. A name over
    80 characters keeps its first 71 and ends in 8 hex digits of the full name's sha256."""
    name = f"relayflow-{stage}-{tenant}_{workflow_id}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}-{digest}"


def execution_arn(state_machine_arn: str, name: str) -> str:
    """The ARN Step Functions gives an execution ``name`` of that state machine (started on
    the machine, one of its versions or its alias)."""
    parts = state_machine_arn.split(":")
    # arn:aws:states:region:account:stateMachine:NAME[:qualifier]
    return ":".join([*parts[:5], "execution", parts[6], name])


class StateMachines(AwsPort):
    """Calls into Step Functions. ``client`` is a boto3 ``stepfunctions`` client (default:
    ``adapters.aws.client("stepfunctions")``, looked up at each call)."""

    service = "stepfunctions"
    error = StepFunctionsError
    errors = {
        **dict.fromkeys(THROTTLING_CODES, Throttled),
        "InvalidDefinition": DefinitionRejected,
        "StateMachineLimitExceeded": DefinitionRejected,
        "ExecutionAlreadyExists": ExecutionExists,
        "ExecutionDoesNotExist": ExecutionMissing,
        "StateMachineAlreadyExists": MachineExists,
        "ResourceNotFound": ResourceMissing,
        "StateMachineDoesNotExist": ResourceMissing,
    }

    def error_class(self, code: str, message: str) -> type[Exception]:
        if code == "AccessDeniedException" and "assume" in message:
            return RoleNotAssumable
        return super().error_class(code, message)

    def _call_with_role(self, action: str, **params: Any) -> dict[str, Any]:
        """:meth:`_call`, tried again while Step Functions cannot assume the role yet."""
        import time

        for pause in (*ROLE_RETRY_SECONDS, None):
            try:
                return self._call(action, **params)
            except RoleNotAssumable:
                if pause is None:
                    raise
                time.sleep(pause)
        raise AssertionError("unreachable")

    # -- machines, versions, alias -----------------------------------------------------------

    def create(
        self,
        name: str,
        definition: str,
        *,
        role_arn: str,
        description: str,
        tags: dict[str, str],
        step_events: bool = False,
        express: bool = False,
    ) -> tuple[str, str]:
        """Create the state machine (``EXPRESS`` with ``express``, else ``STANDARD``) and
        publish its first version; returns both ARNs. When the machine exists already (a
        request that failed half way), update it instead. ``step_events`` logs every event
        for per-step lifecycle events (:func:`logging_configuration`)."""
        try:
            response = self._call_with_role(
                "create_state_machine",
                name=name,
                definition=definition,
                roleArn=role_arn,
                type="EXPRESS" if express else "STANDARD",
                publish=True,
                versionDescription=description,
                tracingConfiguration={"enabled": True},
                **logging_configuration(step_events=step_events, express=express),
                tags=[{"key": k, "value": v} for k, v in tags.items()],
            )
        except MachineExists:
            arn = self._arn_of(name)
            return arn, self.update(
                arn,
                definition,
                role_arn=role_arn,
                description=description,
                step_events=step_events,
                express=express,
            )
        return str(response["stateMachineArn"]), str(response["stateMachineVersionArn"])

    def _arn_of(self, name: str) -> str:
        """The ARN of this account's state machine ``name`` (in the client's region)."""
        from relayflow.adapters.aws import client

        meta = self.client.meta
        account = str(client("sts").get_caller_identity()["Account"])
        return f"arn:{meta.partition}:states:{meta.region_name}:{account}:stateMachine:{name}"

    def update(
        self,
        arn: str,
        definition: str,
        *,
        role_arn: str,
        description: str,
        step_events: bool = False,
        express: bool = False,
    ) -> str:
        """Update the definition (and the logging, see :meth:`create`) and publish it as a new
        version; returns the version ARN. ``express``: the machine is Express."""
        response = self._call_with_role(
            "update_state_machine",
            stateMachineArn=arn,
            definition=definition,
            roleArn=role_arn,
            publish=True,
            versionDescription=description,
            **logging_configuration(step_events=step_events, express=express),
        )
        return str(response["stateMachineVersionArn"])

    def point_alias(self, state_machine_arn: str, version_arn: str) -> str:
        """Route all of the ``live`` alias to ``version_arn`` (creating the alias the first
        time); returns the alias ARN."""
        routing = [{"stateMachineVersionArn": version_arn, "weight": 100}]
        alias_arn = f"{state_machine_arn}:{LIVE_ALIAS}"
        try:
            self._call(
                "update_state_machine_alias",
                stateMachineAliasArn=alias_arn,
                routingConfiguration=routing,
            )
            return alias_arn
        except ResourceMissing:
            pass
        response = self._call(
            "create_state_machine_alias",
            name=LIVE_ALIAS,
            description="The version new Relayflow runs start on.",
            routingConfiguration=routing,
        )
        return str(response["stateMachineAliasArn"])

    # -- executions --------------------------------------------------------------------------

    def start(self, target_arn: str, name: str, input_json: str) -> str:
        """Start an execution of a state machine, version or alias; returns its ARN."""
        response = self._call(
            "start_execution", stateMachineArn=target_arn, name=name, input=input_json
        )
        return str(response["executionArn"])

    def stop(self, execution_arn: str, *, error: str, cause: str) -> None:
        self._call("stop_execution", executionArn=execution_arn, error=error, cause=cause)

    def describe(self, execution_arn: str) -> dict[str, Any] | None:
        """``DescribeExecution``, or ``None`` when the execution does not exist."""
        try:
            return self._call("describe_execution", executionArn=execution_arn)
        except ExecutionMissing:
            return None

    def history(self, execution_arn: str) -> list[dict[str, Any]]:
        """Every history event, oldest first (all pages); empty when the execution does not
        exist (any more)."""
        events: list[dict[str, Any]] = []
        params: dict[str, Any] = {"executionArn": execution_arn, "maxResults": 1000}
        while True:
            try:
                response = self._call("get_execution_history", **params)
            except ExecutionMissing:
                return events
            events.extend(response.get("events", []))
            token = response.get("nextToken")
            if not token:
                return events
            params["nextToken"] = token
