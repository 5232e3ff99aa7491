"""State-machine versions and aliases through the plain boto3 Step Functions client (notes row
15). One group of tests per compatibility fix (``state_machine_versions``,
``version_alias_executions``, ``state_machine_aliases``); each states the AWS behaviour and
fails when its fix is skipped."""

from __future__ import annotations

import json
import uuid

import pytest
from botocore.exceptions import ClientError
from local_asl import INVOKE_WAIT_FOR_TOKEN, machine, pass_state, task, wait_for

from relayflow.local.runtime import LOCAL_ROLE_ARN

pytestmark = pytest.mark.integration


def unique(prefix: str) -> str:
    """A state-machine name not used before in this (possibly shared) runtime."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def definition(result: str, *, wait_seconds: int | None = None) -> str:
    """A Pass state with ``Result: result``, after a Wait of ``wait_seconds`` (scaled)."""
    states = {"Answer": pass_state(Result=result)}
    if wait_seconds is not None:
        states = {"Hold": {"Type": "Wait", "Seconds": wait_seconds, "Next": "Answer"}, **states}
    return json.dumps(machine(states))


def create(rt, name: str, result: str, **kwargs) -> dict:
    return rt.sfn_client.create_state_machine(
        name=name, definition=definition(result), roleArn=LOCAL_ROLE_ARN, **kwargs
    )


def error_code(excinfo: pytest.ExceptionInfo[ClientError]) -> str:
    return str(excinfo.value.response["Error"]["Code"])


def start(rt, arn: str, name: str | None = None, input: str = "{}") -> str:
    return rt.sfn_client.start_execution(
        stateMachineArn=arn, name=name or uuid.uuid4().hex, input=input
    )["executionArn"]


def versioned(rt, prefix: str) -> tuple[str, str, str]:
    """A state machine whose version 1 answers "v1" and version 2 (also current) "v2"."""
    created = create(rt, unique(prefix), "v1", publish=True)
    arn = created["stateMachineArn"]
    updated = rt.sfn_client.update_state_machine(
        stateMachineArn=arn, definition=definition("v2"), publish=True
    )
    return arn, created["stateMachineVersionArn"], updated["stateMachineVersionArn"]


def live_alias(rt, version: str) -> str:
    """The ARN of a new alias "live" routing every execution to ``version``."""
    return rt.sfn_client.create_state_machine_alias(
        name="live", routingConfiguration=[{"stateMachineVersionArn": version, "weight": 100}]
    )["stateMachineAliasArn"]


# -- state_machine_versions -----------------------------------------------------------------


def test_published_versions_are_numbered_and_keep_their_own_definition(rt):
    sfn = rt.sfn_client
    # Given a state machine created with publish=True, then updated with and without publish
    created = create(rt, unique("versions"), "v1", publish=True, versionDescription="first")
    arn = created["stateMachineArn"]
    second = sfn.update_state_machine(
        stateMachineArn=arn, definition=definition("v2"), publish=True
    )
    sfn.update_state_machine(stateMachineArn=arn, definition=definition("v3"))

    # When the current revision is published explicitly
    third = sfn.publish_state_machine_version(stateMachineArn=arn, description="third")

    # Then versions 1, 2, 3 exist, listed newest first, each with its own definition
    assert created["stateMachineVersionArn"] == f"{arn}:1"
    assert second["stateMachineVersionArn"] == f"{arn}:2"
    assert third["stateMachineVersionArn"] == f"{arn}:3" and third["creationDate"]
    listed = sfn.list_state_machine_versions(stateMachineArn=arn)["stateMachineVersions"]
    assert [v["stateMachineVersionArn"] for v in listed] == [f"{arn}:3", f"{arn}:2", f"{arn}:1"]
    for number, result, description in ((1, "v1", "first"), (2, "v2", None), (3, "v3", "third")):
        described = sfn.describe_state_machine(stateMachineArn=f"{arn}:{number}")
        assert described["stateMachineArn"] == f"{arn}:{number}"
        assert json.loads(described["definition"])["States"]["Answer"]["Result"] == result
        assert described.get("description") == description
    # and the state machine itself has the latest definition
    current = json.loads(sfn.describe_state_machine(stateMachineArn=arn)["definition"])
    assert current["States"]["Answer"]["Result"] == "v3"
    # and the versions page
    page = sfn.list_state_machine_versions(stateMachineArn=arn, maxResults=2)
    rest = sfn.list_state_machine_versions(stateMachineArn=arn, nextToken=page["nextToken"])
    assert [
        v["stateMachineVersionArn"]
        for v in page["stateMachineVersions"] + rest["stateMachineVersions"]
    ] == [v["stateMachineVersionArn"] for v in listed]
    assert "nextToken" not in rest


def test_publishing_is_idempotent_per_revision_and_checks_the_revision_id(rt):
    sfn = rt.sfn_client
    # Given a state machine created without publishing (its first revision has no ID)
    arn = create(rt, unique("revisions"), "v1")["stateMachineArn"]
    assert "revisionId" not in sfn.describe_state_machine(stateMachineArn=arn)

    # When its initial revision is published twice, and re-published by an unchanged update
    first = sfn.publish_state_machine_version(stateMachineArn=arn, revisionId="INITIAL")
    again = sfn.publish_state_machine_version(stateMachineArn=arn)
    unchanged = sfn.update_state_machine(
        stateMachineArn=arn, definition=definition("v1"), publish=True
    )

    # Then it is one version
    assert first["stateMachineVersionArn"] == again["stateMachineVersionArn"] == f"{arn}:1"
    assert unchanged["stateMachineVersionArn"] == f"{arn}:1"

    # When the definition changes
    changed = sfn.update_state_machine(stateMachineArn=arn, definition=definition("v2"))

    # Then a new revision is reported, and publishing requires the current revision ID
    revision = changed["revisionId"]
    assert sfn.describe_state_machine(stateMachineArn=arn)["revisionId"] == revision
    for stale in ("INITIAL", "not-the-revision"):
        with pytest.raises(ClientError) as excinfo:
            sfn.publish_state_machine_version(stateMachineArn=arn, revisionId=stale)
        assert error_code(excinfo) == "ConflictException"
    published = sfn.publish_state_machine_version(stateMachineArn=arn, revisionId=revision)
    assert published["stateMachineVersionArn"] == f"{arn}:2"
    assert sfn.describe_state_machine(stateMachineArn=f"{arn}:2")["revisionId"] == revision
    # and an unknown state machine cannot be published
    with pytest.raises(ClientError) as excinfo:
        sfn.publish_state_machine_version(stateMachineArn=f"{arn}-missing")
    assert error_code(excinfo) == "StateMachineDoesNotExist"


def test_a_version_an_alias_routes_to_cannot_be_deleted(rt):
    sfn = rt.sfn_client
    # Given versions 1 and 2, and an alias routing to version 1
    arn, v1, v2 = versioned(rt, "delete-version")
    live_alias(rt, v1)

    # When both versions are deleted
    with pytest.raises(ClientError) as excinfo:
        sfn.delete_state_machine_version(stateMachineVersionArn=v1)
    sfn.delete_state_machine_version(stateMachineVersionArn=v2)

    # Then the routed version stays (ConflictException) and the other one is gone
    assert error_code(excinfo) == "ConflictException"
    assert "live" in excinfo.value.response["Error"]["Message"]
    listed = sfn.list_state_machine_versions(stateMachineArn=arn)["stateMachineVersions"]
    assert [v["stateMachineVersionArn"] for v in listed] == [v1]
    with pytest.raises(ClientError) as excinfo:
        sfn.describe_state_machine(stateMachineArn=v2)
    assert error_code(excinfo) == "StateMachineDoesNotExist"
    # and version numbers are not reused
    sfn.update_state_machine(stateMachineArn=arn, definition=definition("v3"))
    assert sfn.publish_state_machine_version(stateMachineArn=arn)["stateMachineVersionArn"] == (
        f"{arn}:3"
    )


def test_an_update_and_a_publish_at_once_are_served_one_after_the_other(rt, monkeypatch):
    import threading

    from relayflow.local import compat_versions

    sfn = rt.sfn_client
    arn, first, _ = versioned(rt, "atomic")
    sfn.update_state_machine(stateMachineArn=arn, definition=definition("v1"), publish=True)
    # Given an update to a new definition that stops half-way: its definition is set, its
    # revision not yet (the revision id is drawn last)
    halfway, go_on = threading.Event(), threading.Event()

    class SlowRevision:
        def uuid4(self) -> uuid.UUID:
            if threading.current_thread().name == "updater":
                halfway.set()
                go_on.wait(timeout=30)
            return uuid.uuid4()

    monkeypatch.setattr(compat_versions, "uuid", SlowRevision())
    answers: dict[str, str] = {}

    def update() -> None:  # answers[<thread name>]: the version its publish handed back
        answers[threading.current_thread().name] = sfn.update_state_machine(
            stateMachineArn=arn, definition=definition("v9"), publish=True
        )["stateMachineVersionArn"]

    updater = threading.Thread(target=update, name="updater")
    updater.start()
    assert halfway.wait(timeout=30)

    # When a second caller updates to the same definition and publishes meanwhile
    second = threading.Thread(target=update, name="second")
    second.start()
    second.join(timeout=0.5)
    go_on.set()
    updater.join(timeout=30)
    second.join(timeout=30)

    # Then both are handed the version of the new definition, not one of an older revision
    assert answers["updater"] == answers["second"]
    described = sfn.describe_state_machine(stateMachineArn=answers["second"])
    assert json.loads(described["definition"])["States"]["Answer"]["Result"] == "v9"
    assert first != answers["second"]


# -- version_alias_executions ---------------------------------------------------------------


def test_an_execution_started_on_a_version_runs_that_version(rt):
    sfn = rt.sfn_client
    # Given version 1 ("v1") and version 2, the current definition ("v2")
    arn, v1, _ = versioned(rt, "run-version")
    name = unique("on-v1")

    # When version 1 and the state machine itself are started
    on_version = start(rt, v1, name=name)
    on_machine = start(rt, arn)

    # Then each runs its own definition
    record = rt.wait(on_version)
    assert record.status == "SUCCEEDED", (record.error, record.cause)
    assert record.output == "v1"
    assert rt.wait(on_machine).output == "v2"
    # and the execution belongs to the state machine and is associated with the version
    assert on_version.endswith(f":execution:{arn.split(':')[-1]}:{name}")
    assert record.state_machine_arn == arn
    described = sfn.describe_execution(executionArn=on_version)
    assert described["stateMachineArn"] == arn
    assert described["stateMachineVersionArn"] == v1
    assert "stateMachineAliasArn" not in described
    assert "stateMachineVersionArn" not in sfn.describe_execution(executionArn=on_machine)
    started = sfn.get_execution_history(executionArn=on_version)["events"][0]
    assert started["executionStartedEventDetails"]["stateMachineVersionArn"] == v1
    # and the definition it ran is the one described for it
    for_execution = sfn.describe_state_machine_for_execution(executionArn=on_version)
    assert for_execution["stateMachineArn"] == arn
    assert json.loads(for_execution["definition"])["States"]["Answer"]["Result"] == "v1"


def test_an_alias_routes_executions_by_weight(rt):
    sfn = rt.sfn_client
    # Given an alias routing everything to version 1
    arn, v1, v2 = versioned(rt, "run-alias")
    alias = live_alias(rt, v1)

    # When it is started
    execution = start(rt, alias)

    # Then version 1 ran, and the execution is associated with the alias and that version
    assert alias == f"{arn}:live"
    assert rt.wait(execution).output == "v1"
    described = sfn.describe_execution(executionArn=execution)
    assert (described["stateMachineArn"], described["stateMachineAliasArn"]) == (arn, alias)
    assert described["stateMachineVersionArn"] == v1
    details = sfn.get_execution_history(executionArn=execution)["events"][0][
        "executionStartedEventDetails"
    ]
    assert (details["stateMachineAliasArn"], details["stateMachineVersionArn"]) == (alias, v1)

    # When the alias splits traffic 50/50 and is started 30 times
    sfn.update_state_machine_alias(
        stateMachineAliasArn=alias,
        routingConfiguration=[
            {"stateMachineVersionArn": v1, "weight": 50},
            {"stateMachineVersionArn": v2, "weight": 50},
        ],
    )
    outputs = {rt.wait(start(rt, alias)).output for _ in range(30)}

    # Then both versions ran
    assert outputs == {"v1", "v2"}


def test_execution_names_are_unique_per_state_machine_across_versions(rt):
    sfn = rt.sfn_client
    # Given version 1 of a state machine that waits, and an alias to it
    name = unique("names")
    created = sfn.create_state_machine(
        name=name,
        definition=definition("v1", wait_seconds=100),
        roleArn=LOCAL_ROLE_ARN,
        publish=True,
    )
    v1 = created["stateMachineVersionArn"]
    alias = live_alias(rt, v1)

    # When an execution runs on the version and the same name is started again
    running = start(rt, v1, name="once", input='{"a": 1}')

    # Then the same name and input while it runs return it (also through the alias)
    assert start(rt, alias, name="once", input='{"a": 1}') == running
    assert start(rt, v1, name="once", input='{"a": 1}') == running
    # and another input, or the unqualified state machine, is refused
    with pytest.raises(ClientError) as excinfo:
        start(rt, v1, name="once", input='{"a": 2}')
    assert error_code(excinfo) == "ExecutionAlreadyExists"
    with pytest.raises(ClientError) as excinfo:
        start(rt, created["stateMachineArn"], name="once", input='{"a": 2}')
    assert error_code(excinfo) == "ExecutionAlreadyExists"
    # and once it has ended, the name cannot be reused at all
    assert rt.wait(running).output == "v1"
    with pytest.raises(ClientError) as excinfo:
        start(rt, alias, name="once", input='{"a": 1}')
    assert error_code(excinfo) == "ExecutionAlreadyExists"
    # and unknown versions and aliases do not exist
    for missing in (f"{created['stateMachineArn']}:9", f"{created['stateMachineArn']}:gone"):
        with pytest.raises(ClientError) as excinfo:
            start(rt, missing)
        assert error_code(excinfo) == "StateMachineDoesNotExist"


def test_list_executions_filters_by_version_and_alias(rt):
    sfn = rt.sfn_client
    # Given executions started on the state machine, on each version, and on an alias to v1
    arn, v1, v2 = versioned(rt, "list")
    alias = live_alias(rt, v1)
    on_machine, on_v1, on_v2, on_alias = (
        start(rt, arn),
        start(rt, v1),
        start(rt, v2),
        start(rt, alias),
    )
    for execution in (on_machine, on_v1, on_v2, on_alias):
        rt.wait(execution)

    def listed(filter_arn: str, **kwargs) -> list[dict]:
        return sfn.list_executions(stateMachineArn=filter_arn, **kwargs)["executions"]

    # When they are listed by state machine, version and alias
    # Then the state machine lists all of them, a version those it ran, an alias its own
    assert {e["executionArn"] for e in listed(arn)} == {on_machine, on_v1, on_v2, on_alias}
    assert {e["executionArn"] for e in listed(v1)} == {on_v1, on_alias}
    assert {e["executionArn"] for e in listed(v2)} == {on_v2}
    assert {e["executionArn"] for e in listed(alias)} == {on_alias}
    assert rt.list_executions(alias) == [on_alias]
    # and each item names the state machine, and the version/alias it was started through
    items = {e["executionArn"]: e for e in listed(arn, statusFilter="SUCCEEDED")}
    assert {item["stateMachineArn"] for item in items.values()} == {arn}
    assert "stateMachineVersionArn" not in items[on_machine]
    assert items[on_v2]["stateMachineVersionArn"] == v2
    assert (items[on_alias]["stateMachineAliasArn"], items[on_alias]["stateMachineVersionArn"]) == (
        alias,
        v1,
    )
    assert all(item["stopDate"] for item in items.values())
    # and the list pages, newest first
    seen, token = [], None
    while True:
        page = sfn.list_executions(
            stateMachineArn=arn, maxResults=1, **({"nextToken": token} if token else {})
        )
        seen += [e["executionArn"] for e in page["executions"]]
        token = page.get("nextToken")
        if not token:
            break
    assert seen == [e["executionArn"] for e in listed(arn)]
    assert seen[0] == on_alias


def test_stop_history_and_callbacks_work_for_version_and_alias_executions(rt):
    sfn = rt.sfn_client
    # Given an alias to a version that waits for a task token
    tokens: list[str] = []
    rt.register_handler("park-version", lambda event, context: tokens.append(event["token"]))
    payload = {"token.$": "$$.Task.Token"}
    asl = machine({"Await": task("park-version", payload=payload, resource=INVOKE_WAIT_FOR_TOKEN)})
    created = sfn.create_state_machine(
        name=unique("callbacks"), definition=json.dumps(asl), roleArn=LOCAL_ROLE_ARN, publish=True
    )
    v1 = created["stateMachineVersionArn"]
    alias = live_alias(rt, v1)

    # When one execution on the alias gets its callback, and one on the version is stopped
    answered = start(rt, alias)
    token = wait_for(lambda: tokens and tokens[0])
    sfn.send_task_success(taskToken=token, output='{"paid": true}')
    stopped = start(rt, v1)
    wait_for(lambda: len(tokens) == 2)
    sfn.stop_execution(executionArn=stopped, error="Operator.Cancelled", cause="asked to")

    # Then the first succeeds with the callback's output and the second is ABORTED (its token
    # never comes: only the stop can end it)
    record = rt.wait(answered, timeout=30)
    assert record.status == "SUCCEEDED", (record.error, record.cause)
    assert record.output == {"paid": True}
    aborted = rt.wait(stopped, timeout=30)
    assert (aborted.status, aborted.error, aborted.cause) == (
        "ABORTED",
        "Operator.Cancelled",
        "asked to",
    )
    # and their history pages like any other
    events = sfn.get_execution_history(executionArn=answered)["events"]
    first = sfn.get_execution_history(executionArn=answered, maxResults=2)
    rest = sfn.get_execution_history(executionArn=answered, nextToken=first["nextToken"])
    assert [e["id"] for e in first["events"] + rest["events"]] == [e["id"] for e in events]
    assert events[-1]["type"] == "ExecutionSucceeded"


def test_an_alias_pins_each_execution_to_the_version_it_started_on(rt):
    sfn = rt.sfn_client
    # Given version 1 (a Wait, then "v1") and an alias "live" routing to it
    created = sfn.create_state_machine(
        name=unique("pinning"),
        definition=definition("v1", wait_seconds=100),  # 1 s at time_scale 0.01
        roleArn=LOCAL_ROLE_ARN,
        publish=True,
    )
    arn, v1 = created["stateMachineArn"], created["stateMachineVersionArn"]
    alias = live_alias(rt, v1)

    # When run A starts on the alias, and while it waits version 2 ("v2") is published and the
    # alias moved to it, and run B starts on the alias
    run_a = start(rt, alias)
    v2 = sfn.update_state_machine(
        stateMachineArn=arn, definition=definition("v2", wait_seconds=1), publish=True
    )["stateMachineVersionArn"]
    sfn.update_state_machine_alias(
        stateMachineAliasArn=alias,
        routingConfiguration=[{"stateMachineVersionArn": v2, "weight": 100}],
    )
    run_b = start(rt, alias)
    assert sfn.describe_execution(executionArn=run_a)["status"] == "RUNNING"

    # Then A finishes on version 1 and B on version 2
    assert rt.wait(run_a, timeout=10).output == "v1"
    assert rt.wait(run_b, timeout=10).output == "v2"
    assert sfn.describe_execution(executionArn=run_a)["stateMachineVersionArn"] == v1
    assert sfn.describe_execution(executionArn=run_b)["stateMachineVersionArn"] == v2
    # and version 1 still runs its own definition afterwards
    assert rt.wait(start(rt, v1), timeout=10).output == "v1"


# -- state_machine_aliases ------------------------------------------------------------------


def test_alias_routing_is_validated_like_aws(rt):
    sfn = rt.sfn_client
    arn, v1, v2 = versioned(rt, "alias-validation")
    other = create(rt, unique("alias-other"), "x", publish=True)["stateMachineVersionArn"]

    def create_alias(routing: list[tuple[str, int]], name: str = "live") -> str:
        with pytest.raises(ClientError) as excinfo:
            sfn.create_state_machine_alias(
                name=name,
                routingConfiguration=[
                    {"stateMachineVersionArn": version, "weight": weight}
                    for version, weight in routing
                ],
            )
        return error_code(excinfo)

    # Given bad routing configurations, Then the alias is refused as AWS refuses it
    assert create_alias([(v1, 50), (f"{arn}:9", 50)]) == "ResourceNotFound"
    assert create_alias([(v1, 50), (v2, 40)]) == "ValidationException"
    assert create_alias([(v1, 100), (v1, 0)]) == "ValidationException"
    assert create_alias([(v1, 50), (other, 50)]) == "ValidationException"
    assert create_alias([(arn, 100)]) == "ValidationException"
    assert create_alias([(v1, 40), (v2, 40), (f"{arn}:3", 20)]) == "ValidationException"
    assert create_alias([(v1, 100)], name="123") == "ValidationException"
    assert sfn.list_state_machine_aliases(stateMachineArn=arn)["stateMachineAliases"] == []

    # Given an alias, When it is updated to an unknown version or does not exist
    alias = live_alias(rt, v1)
    with pytest.raises(ClientError) as excinfo:
        sfn.update_state_machine_alias(
            stateMachineAliasArn=alias,
            routingConfiguration=[{"stateMachineVersionArn": f"{arn}:9", "weight": 100}],
        )
    assert error_code(excinfo) == "ResourceNotFound"
    with pytest.raises(ClientError) as excinfo:
        sfn.update_state_machine_alias(stateMachineAliasArn=f"{arn}:gone", description="x")
    assert error_code(excinfo) == "ResourceNotFound"

    # Then it still routes to version 1
    described = sfn.describe_state_machine_alias(stateMachineAliasArn=alias)
    assert described["routingConfiguration"] == [{"stateMachineVersionArn": v1, "weight": 100}]


def test_create_alias_is_idempotent_and_conflicts_on_change(rt):
    sfn = rt.sfn_client
    # Given an alias
    _, v1, v2 = versioned(rt, "alias-idempotent")
    routing = [{"stateMachineVersionArn": v1, "weight": 100}]
    first = sfn.create_state_machine_alias(
        name="live", routingConfiguration=routing, description="d"
    )

    # When it is created again, the same and then different
    again = sfn.create_state_machine_alias(
        name="live", routingConfiguration=routing, description="d"
    )
    with pytest.raises(ClientError) as excinfo:
        sfn.create_state_machine_alias(
            name="live", routingConfiguration=[{"stateMachineVersionArn": v2, "weight": 100}]
        )

    # Then the same request returns the alias, and a different one conflicts
    assert (again["stateMachineAliasArn"], again["creationDate"]) == (
        first["stateMachineAliasArn"],
        first["creationDate"],
    )
    assert error_code(excinfo) == "ConflictException"
    described = sfn.describe_state_machine_alias(stateMachineAliasArn=first["stateMachineAliasArn"])
    assert described["routingConfiguration"] == routing
    assert described["description"] == "d"


def test_aliases_are_listed_newest_first_and_by_version(rt):
    sfn = rt.sfn_client
    # Given aliases a (to v1), b (to v2) and c (split between them), created in that order
    arn, v1, v2 = versioned(rt, "alias-list")
    routes = {
        "a": [{"stateMachineVersionArn": v1, "weight": 100}],
        "b": [{"stateMachineVersionArn": v2, "weight": 100}],
        "c": [
            {"stateMachineVersionArn": v1, "weight": 30},
            {"stateMachineVersionArn": v2, "weight": 70},
        ],
    }
    for name, routing in routes.items():
        sfn.create_state_machine_alias(name=name, routingConfiguration=routing)

    def listed(filter_arn: str) -> list[str]:
        aliases = sfn.list_state_machine_aliases(stateMachineArn=filter_arn)["stateMachineAliases"]
        return [a["stateMachineAliasArn"].rsplit(":", 1)[1] for a in aliases]

    # When they are listed for the state machine and for each version
    # Then newest first, and per version only those that route to it
    assert listed(arn) == ["c", "b", "a"]
    assert listed(v1) == ["c", "a"]
    assert listed(v2) == ["c", "b"]

    # When one is deleted, Then it is no longer listed or described
    sfn.delete_state_machine_alias(stateMachineAliasArn=f"{arn}:b")
    assert listed(arn) == ["c", "a"]
    with pytest.raises(ClientError) as excinfo:
        sfn.describe_state_machine_alias(stateMachineAliasArn=f"{arn}:b")
    assert error_code(excinfo) == "ResourceNotFound"


def test_a_malformed_history_token_is_an_invalid_token_error(runtime):
    import botocore.exceptions

    arn = runtime.create_state_machine(
        "paging-token", {"StartAt": "a", "States": {"a": {"Type": "Succeed"}}}
    )
    execution = runtime.start_execution(arn, {})
    runtime.wait(execution)
    try:
        runtime.sfn_client.get_execution_history(executionArn=execution, nextToken="not-a-number")
    except botocore.exceptions.ClientError as exc:
        assert exc.response["Error"]["Code"] == "InvalidToken"
    else:
        raise AssertionError("a malformed token must be refused")
