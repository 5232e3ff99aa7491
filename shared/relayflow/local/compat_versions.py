"""Compatibility fixes: state machine versions and aliases, and executions started on
them (notes row 15).

Registered through :mod:`relayflow.local.compat_registry` on import; applied in the order
:data:`relayflow.local.compat.FAMILIES` gives.
"""

from __future__ import annotations

import copy
import datetime
import json
import re
import uuid
from collections.abc import Callable
from typing import Any

from relayflow.local.compat_registry import Patches, aws_error, fix

#: AWS quota: versions per state machine.
_MAX_VERSIONS = 1000
#: AWS pattern for an alias name: letters, digits, ``_ - .``, and not only digits.
_ALIAS_NAME = re.compile(r"^(?=.*[a-zA-Z_\-.])[a-zA-Z0-9_\-.]+$")


def split_qualified_arn(arn: str) -> tuple[str, str | None]:
    """``(state machine ARN, qualifier)`` of a state machine ARN; the qualifier (a version
    number or an alias name) is None for an unqualified ARN."""
    parts = arn.split(":")
    if len(parts) == 8 and parts[5] == "stateMachine":
        return ":".join(parts[:7]), parts[7]
    return arn, None


def _base_state_machine(backend: Any, arn: str, missing: str = "StateMachineDoesNotExist") -> Any:
    """The (unqualified) state machine ``arn``; raises ``missing`` when there is none."""
    backend._validate_machine_arn(arn)
    for state_machine in backend.state_machines:
        if state_machine.arn == arn:
            return state_machine
    message = {
        "StateMachineDoesNotExist": f"State Machine Does Not Exist: '{arn}'",
        "InvalidArn": f"Invalid arn: '{arn}'",
    }.get(missing, f"Resource not found: '{arn}'")
    raise aws_error(missing, message)


def _version_of(state_machine: Any, qualifier: str | None) -> Any:
    if qualifier is None or not qualifier.isdigit():
        return None
    return state_machine.versions.get(int(qualifier))


def _routes_to(alias: Any, version_arn: str) -> bool:
    return any(r["stateMachineVersionArn"] == version_arn for r in alias.routing_configuration)


def _page(
    request: Any, items: list[Any], key: Callable[[Any], str]
) -> tuple[list[Any], str | None]:
    """One page of ``items``, as the request's ``maxResults`` (default 100, at most 1000) and
    ``nextToken`` ask. The token names the last item returned, so items added meanwhile do
    not shift the pages."""
    import base64

    max_results, token = request._get_param("maxResults"), request._get_param("nextToken")

    size = min(int(max_results or 100), 1000)
    start = 0
    if token:
        keys = [key(item) for item in items]
        try:
            after = base64.urlsafe_b64decode(token.encode()).decode()
            start = keys.index(after) + 1
        except ValueError as exc:  # bad base64/UTF-8, or an item no longer listed
            raise aws_error("InvalidToken", f"Invalid Token: '{token}'") from exc
    page = items[start : start + size]
    if start + size < len(items):
        return page, base64.urlsafe_b64encode(key(page[-1]).encode()).decode()
    return page, None


def _arn_page(request: Any, items: list[Any], field: str, arn_field: str) -> dict[str, Any]:
    """A ``List*`` answer of versions or aliases: one page of ``items`` under ``field``, each
    as its ARN (``arn_field``) and ``creationDate``, and ``nextToken`` when more follow."""
    page, token = _page(request, items, lambda item: item.arn)
    response: dict[str, Any] = {
        field: [{arn_field: item.arn, "creationDate": item.creation_date} for item in page]
    }
    if token:
        response["nextToken"] = token
    return response


def _same_definition(current: Any, new: Any) -> bool:
    try:
        return bool(json.loads(current) == json.loads(new))
    except (TypeError, ValueError):
        return bool(current == new)


@fix("state_machine_versions", "notes row 15")
def _state_machine_versions(patches: Patches) -> None:
    """Versions are immutable snapshots of one *revision* of a state machine (AWS versions
    docs). ``UpdateStateMachine`` makes a new revision when the definition, role or a
    configuration changes, and returns its ``revisionId``, which ``DescribeStateMachine`` also
    reports (the first revision has none). Publishing (``publish=True`` on create/update, or
    ``PublishStateMachineVersion``) makes version N+1 from the current revision, or returns the
    version already published from it (idempotent); ``revisionId`` on ``PublishStateMachineVersion``
    must name the current revision (``INITIAL`` for the first one) or it fails with
    ``ConflictException``; at most 1000 versions. ``ListStateMachineVersions`` lists them newest
    first; ``DeleteStateMachineVersion`` refuses, with ``ConflictException``, a version that an
    alias routes to, and version numbers are never reused. Each of these calls is atomic, as
    on AWS: two callers updating or publishing one machine at once are served one after the
    other.

    moto raised ``NotImplementedError`` for ``PublishStateMachineVersion``,
    ``ListStateMachineVersions`` and ``DeleteStateMachineVersion``, had no revision IDs, and
    published a new version on every ``publish=True`` update, even an unchanged one. (Each
    version already kept its own definition.) Its calls ran unguarded on the caller's thread,
    so a publish could read the revision of a concurrent update half-way: the update had set
    the new definition but not yet its revision, and the publish handed back the version of
    the old definition (step-through runs started on the normal machine)."""
    import threading

    from moto.core.responses import ActionResult, EmptyResult
    from moto.core.utils import utcnow
    from moto.stepfunctions.models import StateMachine, StateMachineInstance, StateMachineVersion
    from moto.stepfunctions.responses import StepFunctionResponse

    original_describe = StepFunctionResponse.describe_state_machine
    original_update = StepFunctionResponse.update_state_machine
    original_create = StepFunctionResponse.create_state_machine
    #: One machine's revisions and versions change under this lock (a call at a time).
    revisions = threading.RLock()

    def atomic(handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def serve(self: Any) -> Any:
            with revisions:
                return handler(self)

        return serve

    def update(self: Any, **kwargs: Any) -> None:
        changed = False
        for key, value in kwargs.items():
            if value is None:
                continue
            current = getattr(self, key, None)
            same = _same_definition(current, value) if key == "definition" else current == value
            changed = changed or not same
            setattr(self, key, value)
        self.update_date = utcnow()
        if changed:
            self.revision_id = str(uuid.uuid4())

    def publish(self: Any, description: str | None) -> None:
        for version in self.versions.values():
            if version.revision_id == self.revision_id:
                self.latest_version = version
                return
        if len(self.versions) >= _MAX_VERSIONS:
            raise aws_error(
                "ServiceQuotaExceededException",
                f"The maximum number of versions ({_MAX_VERSIONS}) has been reached for "
                f"'{self.arn}'",
            )
        number = self.latest_version_number + 1
        version = StateMachineVersion(source=self, version=number, description=description)
        version.revision_id = self.revision_id
        self.versions[number] = version
        self.latest_version = version
        self.latest_version_number = number

    def with_revision_id(result: Any, state_machine: Any) -> Any:
        if state_machine.revision_id:
            result.result["revisionId"] = state_machine.revision_id
        return result

    def describe_state_machine(self: Any) -> Any:
        result = original_describe(self)
        arn = self._get_param("stateMachineArn")
        return with_revision_id(result, self.stepfunction_backend.describe_state_machine(arn))

    def update_state_machine(self: Any) -> Any:
        result = original_update(self)
        arn = self._get_param("stateMachineArn")
        return with_revision_id(result, self.stepfunction_backend.describe_state_machine(arn))

    def publish_state_machine_version(self: Any) -> Any:
        state_machine = _base_state_machine(
            self.stepfunction_backend, self._get_param("stateMachineArn")
        )
        revision_id = self._get_param("revisionId")
        current = state_machine.revision_id or "INITIAL"
        if revision_id is not None and revision_id != current:
            raise aws_error(
                "ConflictException",
                f"Failed to publish the State Machine version for revision {revision_id}. "
                f"The current State Machine revision is {current}.",
            )
        state_machine.publish(self._get_param("description"))
        version = state_machine.latest_version
        return ActionResult(
            {"creationDate": version.creation_date, "stateMachineVersionArn": version.arn}
        )

    def list_state_machine_versions(self: Any) -> Any:
        state_machine = _base_state_machine(
            self.stepfunction_backend, self._get_param("stateMachineArn"), missing="InvalidArn"
        )
        versions = sorted(state_machine.versions.values(), key=lambda v: v.version, reverse=True)
        return ActionResult(
            _arn_page(self, versions, "stateMachineVersions", "stateMachineVersionArn")
        )

    def delete_state_machine_version(self: Any) -> Any:
        backend = self.stepfunction_backend
        arn = self._get_param("stateMachineVersionArn")
        backend._validate_machine_arn(arn)
        base_arn, qualifier = split_qualified_arn(arn)
        if qualifier is None or not qualifier.isdigit():
            raise aws_error("ValidationException", f"Invalid version ARN: '{arn}'")
        state_machine = next((sm for sm in backend.state_machines if sm.arn == base_arn), None)
        version = _version_of(state_machine, qualifier) if state_machine else None
        if version is None:
            return EmptyResult()
        referencing = [a.name for a in state_machine.aliases.values() if _routes_to(a, arn)]
        if referencing:
            raise aws_error(
                "ConflictException",
                "Version to be deleted must not be referenced by an alias. Current list of "
                f"aliases referencing this version: [{', '.join(referencing)}]",
            )
        del state_machine.versions[version.version]
        if state_machine.latest_version is version:
            state_machine.latest_version = max(
                state_machine.versions.values(), key=lambda v: v.version, default=None
            )
        return EmptyResult()

    patches.set(StateMachineInstance, "revision_id", None)
    patches.set(StateMachine, "update", update)
    patches.set(StateMachine, "publish", publish)
    patches.set(StepFunctionResponse, "describe_state_machine", describe_state_machine)
    patches.set(StepFunctionResponse, "create_state_machine", atomic(original_create))
    patches.set(StepFunctionResponse, "update_state_machine", atomic(update_state_machine))
    patches.set(
        StepFunctionResponse,
        "publish_state_machine_version",
        atomic(publish_state_machine_version),
    )
    patches.set(StepFunctionResponse, "list_state_machine_versions", list_state_machine_versions)
    patches.set(
        StepFunctionResponse, "delete_state_machine_version", atomic(delete_state_machine_version)
    )


def _start_qualified_execution(
    backend: Any, arn: str, name: str | None, execution_input: str
) -> Any:
    """Start ``arn`` (a version or alias ARN) as the parser backend starts a state machine, on
    a snapshot of the version; the execution belongs to the state machine."""
    import random

    from moto.stepfunctions.exceptions import InvalidExecutionInput
    from moto.stepfunctions.parser.backend.execution import Execution

    base_arn, qualifier = split_qualified_arn(arn)
    state_machine = _base_state_machine(backend, base_arn)
    alias = None
    if qualifier is not None and not qualifier.isdigit():
        alias = state_machine.aliases.get(qualifier)
        if alias is None:
            raise aws_error("StateMachineDoesNotExist", f"State Machine Does Not Exist: '{arn}'")
        routes = alias.routing_configuration
        chosen = random.choices(
            [route["stateMachineVersionArn"] for route in routes],
            weights=[route["weight"] for route in routes],
        )[0]
        qualifier = split_qualified_arn(chosen)[1]
    version = _version_of(state_machine, qualifier)
    if version is None:
        raise aws_error("StateMachineDoesNotExist", f"State Machine Does Not Exist: '{arn}'")

    name = name or str(uuid.uuid4())
    backend._validate_name(name)
    existing = state_machine._handle_name_input_idempotency(name, execution_input)
    if existing is not None:
        return existing
    try:
        json.loads(execution_input)
    except ValueError as exc:
        raise InvalidExecutionInput(f"Invalid State Machine Execution Input: '{exc}'") from exc

    snapshot = copy.deepcopy(version)
    execution = Execution(
        name=name,
        sm_type=snapshot.sm_type,
        role_arn=snapshot.roleArn,
        exec_arn=(
            f"arn:{backend.partition}:states:{backend.region_name}:{backend.account_id}:"
            f"execution:{state_machine.name}:{name}"
        ),
        account_id=backend.account_id,
        region_name=backend.region_name,
        state_machine=snapshot,
        start_date=datetime.datetime.now(tz=datetime.UTC),
        cloud_watch_logging_session=None,
        input_data=execution_input,
        activity_store={},
    )
    execution.state_machine_arn = state_machine.arn
    execution.state_machine_version_arn = version.arn
    execution.state_machine_alias_arn = alias.arn if alias is not None else None
    state_machine.executions.append(execution)
    execution.start()
    return execution


@fix("version_alias_executions", "notes row 15")
def _version_alias_executions(patches: Patches) -> None:
    """``StartExecution`` accepts a version ARN (runs that version's definition) or an alias ARN
    (runs the version the alias routes to; with two routes, picked at random by weight), as on
    AWS. The execution belongs to the state machine: its ARN is
    ``…:execution:<state machine>:<name>``, names are unique per state machine (same name and
    input while running returns it again; otherwise ``ExecutionAlreadyExists``), and stop,
    history and task callbacks work as for any execution. ``DescribeExecution`` and
    ``ListExecutions`` items give the base ``stateMachineArn`` with ``stateMachineVersionArn``
    and, when started through an alias, ``stateMachineAliasArn``; so does the
    ``ExecutionStarted`` history event. ``ListExecutions`` takes the state machine ARN (every
    execution), a version ARN or an alias ARN (the executions started through it).
    ``DescribeStateMachineForExecution`` gives the definition the execution ran.

    moto raised ``AttributeError`` ('StateMachineVersion' object has no attribute
    '_handle_name_input_idempotency') on a version ARN and ``StateMachineDoesNotExist`` on an
    alias ARN, listed nothing for a version ARN, and described the state machine's current
    definition for any execution."""
    from moto.core.responses import ActionResult
    from moto.stepfunctions.parser.api import (
        ExecutionStartedEventDetails,
        HistoryEventExecutionDataDetails,
        HistoryEventType,
    )
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
    from moto.stepfunctions.parser.asl.utils.encoding import to_json_str
    from moto.stepfunctions.parser.backend.execution import Execution
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
    from moto.stepfunctions.responses import StepFunctionResponse

    original_start = StepFunctionResponse.start_execution
    original_describe = StepFunctionResponse.describe_execution
    original_list = StepFunctionResponse.list_executions

    def start_execution(self: Any) -> Any:
        arn = self._get_param("stateMachineArn")
        if split_qualified_arn(arn)[1] is None:
            return original_start(self)
        execution = _start_qualified_execution(
            self.stepfunction_backend,
            arn,
            self._get_param("name"),
            self._get_param("input", if_none="{}"),
        )
        return ActionResult(
            {"executionArn": execution.execution_arn, "startDate": execution.start_date}
        )

    def associations(execution: Any) -> dict[str, str]:
        out = {}
        if execution.state_machine_version_arn:
            out["stateMachineVersionArn"] = execution.state_machine_version_arn
        if execution.state_machine_alias_arn:
            out["stateMachineAliasArn"] = execution.state_machine_alias_arn
        return out

    def describe_execution(self: Any) -> Any:
        result = original_describe(self)
        execution = self.stepfunction_backend.describe_execution(self._get_param("executionArn"))
        result.result.update(associations(execution))
        return result

    def list_executions(self: Any) -> Any:
        arn = self._get_param("stateMachineArn")
        if not arn:
            return original_list(self)
        base_arn, qualifier = split_qualified_arn(arn)
        state_machine = _base_state_machine(self.stepfunction_backend, base_arn)
        if qualifier is not None:
            exists = (
                _version_of(state_machine, qualifier) is not None
                if qualifier.isdigit()
                else qualifier in state_machine.aliases
            )
            if not exists:
                raise aws_error(
                    "StateMachineDoesNotExist", f"State Machine Does Not Exist: '{arn}'"
                )
        status = self._get_param("statusFilter")
        executions = [
            e
            for e in state_machine.executions
            if (
                qualifier is None or arn in (e.state_machine_version_arn, e.state_machine_alias_arn)
            )
            and (not status or e.status == status)
        ]
        executions.sort(key=lambda e: e.start_date, reverse=True)
        page, token = _page(self, executions, lambda e: e.execution_arn)
        items = []
        for execution in page:
            item = {
                "executionArn": execution.execution_arn,
                "stateMachineArn": state_machine.arn,
                "name": execution.name,
                "status": execution.status,
                "startDate": execution.start_date,
                **associations(execution),
            }
            if execution.status != "RUNNING" and execution.stop_date is not None:
                item["stopDate"] = execution.stop_date
            items.append(item)
        response: dict[str, Any] = {"executions": items}
        if token:
            response["nextToken"] = token
        return ActionResult(response)

    def describe_state_machine_for_execution(self: Any) -> Any:
        execution = self.stepfunction_backend.describe_execution(self._get_param("executionArn"))
        snapshot = execution.state_machine
        response = {
            "stateMachineArn": execution.state_machine_arn,
            "name": snapshot.name,
            "definition": snapshot.definition,
            "roleArn": snapshot.roleArn,
            "updateDate": snapshot.update_date,
            "loggingConfiguration": snapshot.loggingConfiguration,
            "tracingConfiguration": snapshot.tracingConfiguration,
            "encryptionConfiguration": snapshot.encryptionConfiguration,
        }
        if getattr(snapshot, "revision_id", None):
            response["revisionId"] = snapshot.revision_id
        return ActionResult(response)

    def execution_logic(self: Any) -> None:
        # ExecutionWorker._execution_logic, with the version/alias in ExecutionStarted.
        program = self._get_evaluation_entrypoint()
        self.env = self._get_evaluation_environment()
        details = ExecutionStartedEventDetails(
            input=to_json_str(self._evaluation_details.execution_details.inpt),
            inputDetails=HistoryEventExecutionDataDetails(truncated=False),
            roleArn=self._evaluation_details.aws_execution_details.role_arn,
        )
        execution = getattr(self._execution_communication, "execution", None)
        if isinstance(execution, Execution):
            details.update(associations(execution))
        self.env.event_manager.add_event(
            context=self.env.event_history_context,
            event_type=HistoryEventType.ExecutionStarted,
            event_details=EventDetails(executionStartedEventDetails=details),
            update_source_event_id=False,
        )
        program.eval(self.env)
        self._execution_communication.terminated()

    patches.set(Execution, "state_machine_version_arn", None)
    patches.set(Execution, "state_machine_alias_arn", None)
    patches.set(StepFunctionResponse, "start_execution", start_execution)
    patches.set(StepFunctionResponse, "describe_execution", describe_execution)
    patches.set(StepFunctionResponse, "list_executions", list_executions)
    patches.set(
        StepFunctionResponse,
        "describe_state_machine_for_execution",
        describe_state_machine_for_execution,
    )
    patches.set(ExecutionWorker, "_execution_logic", execution_logic)


def _routed_state_machine(backend: Any, routing: Any) -> Any:
    """The state machine whose versions ``routingConfiguration`` names, validated as AWS does:
    1 or 2 distinct version ARNs of one state machine, weights 0-100 summing to 100, and every
    version existing (``ResourceNotFound`` otherwise)."""
    if not isinstance(routing, list) or not 1 <= len(routing) <= 2:
        raise aws_error(
            "ValidationException",
            "1 validation error detected: Value at 'routingConfiguration' failed to satisfy "
            "constraint: Member must have length between 1 and 2",
        )
    arns = [route["stateMachineVersionArn"] for route in routing]
    listed = f"[{', '.join(arns)}]"
    if len(set(arns)) < len(arns):
        raise aws_error(
            "ValidationException",
            f"Routing configuration must contain distinct state machine version ARNs. "
            f"Received: {listed}",
        )
    weights = [route["weight"] for route in routing]
    for i, weight in enumerate(weights, start=1):
        if not 0 <= weight <= 100:
            raise aws_error(
                "ValidationException",
                f"Invalid value for parameter routingConfiguration[{i}].weight, value: "
                f"{weight}, valid range: 0-100",
            )
    if sum(weights) != 100:
        raise aws_error(
            "ValidationException",
            f"Sum of routing configuration weights must equal 100. Received: {weights}",
        )
    qualified = [split_qualified_arn(arn) for arn in arns]
    if any(q is None or not q.isdigit() for _, q in qualified):
        raise aws_error(
            "ValidationException",
            f"Routing configuration must contain state machine version ARNs. Received: {listed}",
        )
    if len({base for base, _ in qualified}) > 1:
        raise aws_error(
            "ValidationException",
            f"Routing configuration must contain versions of one state machine. Received: {listed}",
        )
    state_machine = _base_state_machine(backend, qualified[0][0], missing="ResourceNotFound")
    for arn, (_, qualifier) in zip(arns, qualified, strict=True):
        if _version_of(state_machine, qualifier) is None:
            raise aws_error("ResourceNotFound", f"Resource not found: '{arn}'")
    return state_machine


def _routing_key(routing: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return sorted((route["stateMachineVersionArn"], route["weight"]) for route in routing)


@fix("state_machine_aliases", "notes row 15")
def _state_machine_aliases(patches: Patches) -> None:
    """Aliases are validated as on AWS: the name matches ``[a-zA-Z0-9_.-]+`` with at least one
    non-digit (at most 80 characters), the routing names 1 or 2 distinct *versions* of one state
    machine with weights 0-100 summing to 100, and every version exists (``ResourceNotFound``),
    on create and on update. ``CreateStateMachineAlias`` is idempotent: the same name,
    description and routing return the alias again, a different one fails with
    ``ConflictException``. ``UpdateStateMachineAlias`` on a missing alias fails with
    ``ResourceNotFound``. ``ListStateMachineAliases`` lists newest first, and given a version ARN
    lists the aliases that route to that version.

    moto checked only that the *first* routed version exists (raising
    ``StateMachineDoesNotExist``), accepted any name, silently replaced an existing alias on
    create, did not check the versions on update, listed oldest first and rejected a version
    ARN in ``ListStateMachineAliases``."""
    from moto.core.responses import ActionResult
    from moto.stepfunctions.models import StateMachineAlias
    from moto.stepfunctions.responses import StepFunctionResponse

    def create_state_machine_alias(self: Any) -> Any:
        name = self._get_param("name")
        routing = self._get_param("routingConfiguration")
        description = self._get_param("description")
        if not isinstance(name, str) or len(name) > 80 or not _ALIAS_NAME.match(name):
            raise aws_error(
                "ValidationException",
                f"1 validation error detected: Value '{name}' at 'name' failed to satisfy "
                "constraint: Member must satisfy regular expression pattern: "
                r"^(?=.*[a-zA-Z_\-\.])[a-zA-Z0-9_\-\.]+$",
            )
        state_machine = _routed_state_machine(self.stepfunction_backend, routing)
        alias = state_machine.aliases.get(name)
        if alias is not None:
            if (alias.description, _routing_key(alias.routing_configuration)) != (
                description,
                _routing_key(routing),
            ):
                raise aws_error(
                    "ConflictException",
                    "Failed to create alias because an alias with the same name and a "
                    "different routing configuration already exists.",
                )
        else:
            alias = StateMachineAlias(name, state_machine.arn, copy.deepcopy(routing), description)
            state_machine.aliases[name] = alias
        return ActionResult(
            {"stateMachineAliasArn": alias.arn, "creationDate": alias.creation_date}
        )

    def find_alias(backend: Any, arn: str) -> Any:
        base_arn, qualifier = split_qualified_arn(arn)
        backend._validate_machine_arn(arn)
        state_machine = next((sm for sm in backend.state_machines if sm.arn == base_arn), None)
        alias = state_machine.aliases.get(qualifier) if state_machine and qualifier else None
        if alias is None:
            raise aws_error("ResourceNotFound", f"Resource not found: '{arn}'")
        return alias

    def update_state_machine_alias(self: Any) -> Any:
        arn = self._get_param("stateMachineAliasArn")
        description = self._get_param("description")
        routing = self._get_param("routingConfiguration")
        if description is None and routing is None:
            raise aws_error(
                "ValidationException",
                "You must provide at least one of routingConfiguration or description",
            )
        alias = find_alias(self.stepfunction_backend, arn)
        if routing is not None:
            state_machine = _routed_state_machine(self.stepfunction_backend, routing)
            if state_machine.arn != alias.statemachine_arn:
                raise aws_error(
                    "ValidationException",
                    "Routing configuration must contain versions of the alias's state machine.",
                )
            alias.update(routing_configuration=copy.deepcopy(routing))
        if description is not None:
            alias.update(description=description)
        return ActionResult({"updateDate": alias.update_date})

    def list_state_machine_aliases(self: Any) -> Any:
        arn = self._get_param("stateMachineArn")
        base_arn, qualifier = split_qualified_arn(arn)
        state_machine = _base_state_machine(self.stepfunction_backend, base_arn)
        aliases = list(reversed(state_machine.aliases.values()))
        if qualifier is not None:
            if _version_of(state_machine, qualifier) is None:
                raise aws_error("ResourceNotFound", f"Resource not found: '{arn}'")
            aliases = [alias for alias in aliases if _routes_to(alias, arn)]
        return ActionResult(_arn_page(self, aliases, "stateMachineAliases", "stateMachineAliasArn"))

    patches.set(StepFunctionResponse, "create_state_machine_alias", create_state_machine_alias)
    patches.set(StepFunctionResponse, "update_state_machine_alias", update_state_machine_alias)
    patches.set(StepFunctionResponse, "list_state_machine_aliases", list_state_machine_aliases)
