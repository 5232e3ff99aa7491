"""What ``serve --state`` keeps and how a run under way goes on after a restart: the state
file (relayflow.local.state_dir), the state a run was in and the revival variant
(relayflow.local.revive), and a revived run's joined history (relayflow.local.compat_archive).
The restart itself, end to end, is tests/integration/test_serve_state.py."""

from __future__ import annotations

import copy
import datetime
import json
import os
import stat
from pathlib import Path

import pytest

from relayflow.compiler.check import assert_valid_machine
from relayflow.local.compat_archive import Archived, joined_history
from relayflow.local.revive import REVIVAL_CHOICE, Entry, active_state, revival_variant
from relayflow.local.state_dir import FORMAT, Captured, StateDir, StateDirError, encoded

GOLDEN = Path(__file__).parents[1] / "golden"


def golden(name: str) -> dict:
    return json.loads((GOLDEN / f"{name}.asl.json").read_text())


def entered(name: str, data: str = "{}", kind: str = "Task") -> dict:
    return {
        "type": f"{kind}StateEntered",
        "stateEnteredEventDetails": {"name": name, "input": data},
    }


def exited(name: str, kind: str = "Task") -> dict:
    return {"type": f"{kind}StateExited", "stateExitedEventDetails": {"name": name}}


# -- the state the run was in -----------------------------------------------------------------


def test_the_state_entered_and_not_left_is_where_the_run_was():
    events = [
        {"type": "ExecutionStarted"},
        entered("a", '{"n":1}'),
        exited("a"),
        entered("b", '{"n":2}'),
        {"type": "TaskScheduled"},
    ]
    assert active_state(events, ["a", "b", "c"]) == Entry(3, "b", '{"n":2}')


def test_states_inside_a_parallel_or_for_each_belong_to_the_main_flow_state_holding_them():
    events = [
        entered("fan", '{"items":[1,2]}', "Map"),
        entered("fan.item"),
        exited("fan.item"),
        entered("fan.item"),
    ]
    assert active_state(events, ["fan", "after"]) == Entry(0, "fan", '{"items":[1,2]}')


def test_a_run_between_states_or_at_its_end_was_in_none():
    assert active_state([entered("a"), exited("a")], ["a"]) is None
    assert active_state([{"type": "ExecutionStarted"}], ["a"]) is None
    # a state left by its Catch (no Exited event) gives way to the state the Catch entered
    failed = [entered("a"), {"type": "TaskFailed"}, entered("a.park", '{"e":1}')]
    assert active_state(failed, ["a", "a.park"]) == Entry(2, "a.park", '{"e":1}')


# -- the revival variant ----------------------------------------------------------------------


def test_the_revival_variant_enters_each_state_with_the_kept_data():
    asl = golden("approval")
    before = copy.deepcopy(asl)
    variant = revival_variant(asl, ["ask", "pay"])
    assert asl == before
    assert variant["StartAt"] == REVIVAL_CHOICE
    choice = variant["States"][REVIVAL_CHOICE]
    assert choice["Default"] == asl["StartAt"]
    assert {r["StringEquals"]: r["Next"] for r in choice["Choices"]} == {
        "ask": "_revive.ask",
        "pay": "_revive.pay",
    }
    assert variant["States"]["_revive.pay"] == {
        "Type": "Pass",
        "InputPath": "$.revive.input",
        "Next": "pay",
    }
    assert_valid_machine(variant)


def test_reviving_a_revived_run_replaces_the_doors_of_the_first_revival():
    asl = golden("approval")
    once = revival_variant(asl, ["ask"])
    twice = revival_variant(once, ["pay"])
    assert twice["States"][REVIVAL_CHOICE]["Default"] == asl["StartAt"]
    assert not any(name == "_revive.ask" for name in twice["States"])
    assert set(twice["States"]) == set(asl["States"]) | {REVIVAL_CHOICE, "_revive.pay"}
    assert_valid_machine(twice)


def test_doors_to_states_with_long_names_stay_within_80_characters():
    # Given a machine whose waiting state's name has 75 characters (a 64-character step key's
    # approval gate is longer than the 72 that "_revive." leaves)
    long = "a" * 64 + ".approval"
    asl = {
        "StartAt": long,
        "States": {long: {"Type": "Pass", "Next": "done"}, "done": {"Type": "Succeed"}},
    }
    # When its revival variant is built for it and for a short one
    variant = revival_variant(asl, [long, "done"])
    # Then every door is a valid state name, distinct, and leads to its state
    assert_valid_machine(variant)
    doors = {r["StringEquals"]: r["Next"] for r in variant["States"][REVIVAL_CHOICE]["Choices"]}
    assert doors["done"] == "_revive.done"
    assert len(doors[long]) <= 80 and doors[long].startswith("_revive.")
    assert variant["States"][doors[long]]["Next"] == long
    # And a second revival replaces the hashed door too
    again = revival_variant(variant, [long])
    assert set(again["States"]) == set(asl["States"]) | {REVIVAL_CHOICE, doors[long]}


# -- the joined history -----------------------------------------------------------------------


def numbered(events: list[dict]) -> list[dict]:
    return [{**e, "id": i + 1, "previousEventId": i} for i, e in enumerate(events)]


def test_a_revived_history_is_joined_and_renumbered():
    # Given a kept history that waited in "ask" (its 3rd event), and the revived execution's
    kept = Archived(
        description={},
        events=numbered(
            [{"type": "ExecutionStarted"}, entered("call"), exited("call"), entered("ask")]
        ),
        cut=3,
    )
    live = numbered(
        [
            {"type": "ExecutionStarted"},
            entered("_revive.at", kind="Choice"),
            exited("_revive.at", kind="Choice"),
            entered("_revive.ask", kind="Pass"),
            exited("_revive.ask", kind="Pass"),
            entered("ask"),
            {"type": "TaskSucceeded"},
        ]
    )
    # When they are joined
    joined = joined_history(kept, live)
    # Then the kept events before "ask" come first, then the live ones from "ask" on
    names = [
        (
            e["type"],
            (e.get("stateEnteredEventDetails") or e.get("stateExitedEventDetails") or {}).get(
                "name"
            ),
        )
        for e in joined
    ]
    assert names == [
        ("ExecutionStarted", None),
        ("TaskStateEntered", "call"),
        ("TaskStateExited", "call"),
        ("TaskStateEntered", "ask"),
        ("TaskSucceeded", None),
    ]
    # numbered one after the other, each pointing at the one before
    assert [e["id"] for e in joined] == [1, 2, 3, 4, 5]
    assert [e["previousEventId"] for e in joined] == [0, 1, 2, 3, 4]


# -- the state file ---------------------------------------------------------------------------


def test_the_state_file_keeps_dates_and_bytes_and_is_private(tmp_path):
    state = StateDir(tmp_path / "state")
    moment = datetime.datetime(2026, 12, 3, 9, 0, tzinfo=datetime.UTC)
    saved = {"format": FORMAT, "when": moment, "body": b"\x00\xffpayload", "nested": [{"x": 1}]}
    execution = {"description": {"status": "SUCCEEDED", "stopDate": moment}, "events": []}
    state.save(Captured(saved, {"arn:1": json.dumps(encoded(execution))}))
    assert state.load() == {**saved, "executions": {"arn:1": execution}}
    assert stat.S_IMODE(state.path.stat().st_mode) == 0o700
    assert stat.S_IMODE(state.file.stat().st_mode) == 0o600
    assert [p.name for p in state.path.iterdir()] == ["state.json"]  # no temporary left
    assert StateDir(tmp_path / "empty").load() is None


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757, 0o722])
def test_a_state_directory_others_may_write_is_refused_naming_its_mode(tmp_path, mode):
    # Given an existing --state directory that group or others may write
    path = tmp_path / "state"
    path.mkdir()
    path.chmod(mode)
    # When the server opens it, Then it refuses, naming the mode, and changes nothing
    with pytest.raises(StateDirError, match=rf"has mode {mode:04o}.*chmod 700"):
        StateDir(path).open()
    assert stat.S_IMODE(path.stat().st_mode) == mode


def test_a_state_directory_of_ours_others_may_only_read_is_made_private(tmp_path):
    # Given an existing directory of ours with mode 0755 (mkdir's default under umask 022)
    path = tmp_path / "state"
    path.mkdir()
    path.chmod(0o755)
    # When the server opens it, Then only its owner may enter it from now on
    StateDir(path).open()
    assert stat.S_IMODE(path.stat().st_mode) == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory away needs root")
def test_another_users_readable_state_directory_is_refused(tmp_path):
    path = tmp_path / "state"
    path.mkdir()
    path.chmod(0o755)
    os.chown(path, 65534, -1)
    with pytest.raises(StateDirError, match="mode 0755 and belongs to another user"):
        StateDir(path).open()


def test_a_killed_saves_temporary_file_is_removed_at_open(tmp_path):
    # Given a save that was killed between writing its temporary file and the rename
    state = StateDir(tmp_path / "state")
    state.save(Captured({"format": FORMAT, "n": 1}, {}))
    leftover = state.path / ".state-k1ll3d"
    leftover.write_text('{"format": 1, "secrets": ["a copy of every secret"]}')
    # When the server opens the directory again
    state.open()
    # Then the leftover is gone and the last complete save is still there
    assert [p.name for p in state.path.iterdir()] == ["state.json"]
    assert state.load() == {"format": FORMAT, "n": 1, "executions": {}}


def test_a_state_path_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "state").write_text("")
    with pytest.raises(StateDirError, match="is not a directory"):
        StateDir(tmp_path / "state").open()


@pytest.mark.parametrize(
    ("text", "says"), [('{"format": 99}', "format 99"), ("{not json", "is not JSON")]
)
def test_a_state_file_it_cannot_read_is_refused_not_guessed_at(tmp_path, text, says):
    state = StateDir(tmp_path)
    state.file.write_text(text)
    with pytest.raises(StateDirError, match=says):
        state.load()


# -- carrying a run on ------------------------------------------------------------------------


class FakeSfn:
    """The Step Functions calls revive_runs makes, for one parked execution whose revived
    execution stores its wait (TaskSubmitted) only at the ``submitted_at``-th history read."""

    def __init__(self, submitted_at: int) -> None:
        self.submitted_at = submitted_at
        self.reads = 0
        self.started: list[dict] = []

    def describe_state_machine(self, stateMachineArn: str) -> dict:
        return {"type": "STANDARD", "definition": "{}"}

    def update_state_machine(self, **kwargs: object) -> dict:
        return {"stateMachineVersionArn": "arn:aws:states:r:1:stateMachine:m:9"}

    def start_execution(self, **kwargs: object) -> dict:
        self.started.append(kwargs)
        return {"executionArn": "arn:aws:states:r:1:execution:m:run-1"}

    def get_execution_history(self, **kwargs: object) -> dict:
        self.reads += 1
        live = [{"id": 3, "type": "TaskStateEntered"}, {"id": 4, "type": "TaskScheduled"}]
        if self.reads >= self.submitted_at:
            live.append({"id": 5, "type": "TaskSubmitted"})
        kept = [{"id": 2, "type": "TaskStateEntered"}, {"id": 1, "type": "ExecutionStarted"}]
        return {"events": list(reversed(live)) + kept}  # newest first


class FakeRuntime:
    region, account = "r", "1"

    def __init__(self, sfn: FakeSfn) -> None:
        self.sfn_client = sfn

    def list_executions(self) -> list[str]:  # moto's executions: the ones started again
        return [
            f"arn:aws:states:r:1:execution:m:{start['name']}" for start in self.sfn_client.started
        ]


@pytest.fixture
def parked_execution():
    from relayflow.local import compat_archive

    arn = "arn:aws:states:r:1:execution:m:run-1"
    asl = {
        "StartAt": "call",
        "States": {
            "call": {"Type": "Pass", "Next": "call.park"},
            "call.park": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
                "End": True,
            },
        },
    }
    run = {"id": "run-1", "tenant": "acme"}
    kept = Archived(
        description={
            "executionArn": arn,
            "name": "run-1",
            "status": "RUNNING",
            "input": json.dumps({"run": run}),
        },
        events=[
            {"id": 1, "type": "ExecutionStarted"},
            entered("call.park", json.dumps({"run": run, "error": {"Error": "E"}})),
        ],
        machine={
            "stateMachineArn": "arn:aws:states:r:1:stateMachine:m",
            "definition": json.dumps(asl),
        },
    )
    compat_archive.archive({arn: kept})
    yield arn, kept
    compat_archive.forget()


def test_a_revived_run_is_back_at_its_wait_before_revive_returns(parked_execution):
    from relayflow.local.revive import revive_runs

    arn, kept = parked_execution
    sfn = FakeSfn(submitted_at=4)
    # When a parked run is carried on
    outcome = revive_runs(FakeRuntime(sfn), {arn: kept}, [], lambda description: None)
    # Then it started again at its park, with the data the park was entered with
    assert outcome.revived == [arn] and outcome.failed == []
    (start,) = sfn.started
    sent = json.loads(str(start["input"]))
    assert sent["revive"]["at"] == "call.park" and sent["revive"]["input"]["error"] == {
        "Error": "E"
    }
    assert sent["run"] == {"id": "run-1", "tenant": "acme"}
    # and revive returned only once the park was stored again under the new token
    assert sfn.reads == 4


def test_a_revived_run_slow_to_come_back_does_not_hold_the_server_forever(parked_execution):
    from relayflow.local.revive import revive_runs

    arn, kept = parked_execution
    sfn = FakeSfn(submitted_at=10**9)
    outcome = revive_runs(
        FakeRuntime(sfn), {arn: kept}, [], lambda description: None, settle_timeout=0.1
    )
    assert outcome.revived == [arn] and sfn.reads >= 1


def test_a_sub_workflow_child_is_waited_for_until_its_parent_has_started_it_again(
    parked_execution,
):
    from relayflow.local import compat_archive
    from relayflow.local.revive import revive_runs

    arn, kept = parked_execution
    # Given a child run (started by the parked run) that waited at its approval
    child_arn = "arn:aws:states:r:1:execution:child:c-1"
    child_run = {"id": "c-1", "tenant": "acme", "depth": 1, "parent": {"run_id": "run-1"}}
    asl = {
        "StartAt": "ask",
        "States": {"ask": json.loads(kept.machine["definition"])["States"]["call.park"]},
    }
    child = Archived(
        description={
            "executionArn": child_arn,
            "name": "c-1",
            "status": "RUNNING",
            "input": json.dumps({"run": child_run}),
            "stateMachineArn": "arn:aws:states:r:1:stateMachine:child",
        },
        events=[
            {"id": 1, "type": "ExecutionStarted"},
            entered("ask", json.dumps({"run": child_run})),
        ],
        machine={
            "stateMachineArn": "arn:aws:states:r:1:stateMachine:child",
            "definition": json.dumps(asl),
        },
    )
    compat_archive.archive({child_arn: child})

    class ChildLater(FakeRuntime):
        """The parent's re-entered sub_workflow step starts the child at the 5th look."""

        looks = 0

        def list_executions(self) -> list[str]:
            self.looks += 1
            return super().list_executions() + ([child_arn] if self.looks >= 5 else [])

    runtime = ChildLater(FakeSfn(submitted_at=1))
    # When the runs are carried on
    outcome = revive_runs(runtime, {arn: kept, child_arn: child}, [], lambda description: None)
    # Then only the parent was started again, the child goes on through it, and revive
    # returned only once the child was there again
    assert [start["name"] for start in runtime.sfn_client.started] == ["run-1"]
    assert sorted(outcome.revived) == sorted([arn, child_arn]) and outcome.failed == []
    assert runtime.looks == 5
