"""ASL states, one class per state kind.

Each class lists the fields its kind allows, in the order the ASL specification presents
them, so ``to_dict()`` output is deterministic and a field a kind does not support cannot be
emitted by mistake.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

#: Dataclass attribute → ASL field name.
_ASL_NAMES = {
    "comment": "Comment",
    "next": "Next",
    "end": "End",
    "input_path": "InputPath",
    "parameters": "Parameters",
    "item_selector": "ItemSelector",
    "result": "Result",
    "result_selector": "ResultSelector",
    "result_path": "ResultPath",
    "output_path": "OutputPath",
    "resource": "Resource",
    "timeout_seconds": "TimeoutSeconds",
    "retry": "Retry",
    "catch": "Catch",
    "choices": "Choices",
    "default": "Default",
    "seconds": "Seconds",
    "seconds_path": "SecondsPath",
    "timestamp": "Timestamp",
    "timestamp_path": "TimestampPath",
    "branches": "Branches",
    "items_path": "ItemsPath",
    "max_concurrency": "MaxConcurrency",
    "item_processor": "ItemProcessor",
    "item_reader": "ItemReader",
    "tolerated_failure_count": "ToleratedFailureCount",
    "tolerated_failure_percentage": "ToleratedFailurePercentage",
    "result_writer": "ResultWriter",
    "error": "Error",
    "cause": "Cause",
    "error_path": "ErrorPath",
    "cause_path": "CausePath",
}


@dataclass
class State:
    kind: ClassVar[str] = ""
    comment: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"Type": self.kind}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value is False or value == []:
                continue
            if isinstance(value, ScopeMachine):
                value = value.to_dict()
            elif isinstance(value, list) and value and isinstance(value[0], ScopeMachine):
                value = [v.to_dict() for v in value]
            out[_ASL_NAMES[f.name]] = value
        return out


@dataclass
class _Flow(State):
    """Fields of states that move on: either ``Next`` or ``End``."""

    next: str | None = None
    end: bool = False


@dataclass
class Pass(_Flow):
    kind: ClassVar[str] = "Pass"
    input_path: str | None = None
    parameters: dict[str, Any] | None = None
    result: Any = None
    result_path: str | None = None
    output_path: str | None = None

    @classmethod
    def intrinsic(cls, field_name: str, call: str, result_path: str, then: str) -> Pass:
        """A Pass that writes ``{field_name: <the intrinsic function call's value>}`` at
        ``result_path`` and goes on to ``then``."""
        return cls(parameters={f"{field_name}.$": call}, result_path=result_path, next=then)


@dataclass
class Task(_Flow):
    kind: ClassVar[str] = "Task"
    resource: str = ""
    parameters: dict[str, Any] | None = None
    result_selector: dict[str, Any] | None = None
    result_path: str | None = None
    output_path: str | None = None
    timeout_seconds: int | None = None
    retry: list[dict[str, Any]] = field(default_factory=list)
    catch: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Choice(State):
    kind: ClassVar[str] = "Choice"
    choices: list[dict[str, Any]] = field(default_factory=list)
    default: str | None = None


@dataclass
class Wait(_Flow):
    kind: ClassVar[str] = "Wait"
    seconds: int | None = None
    seconds_path: str | None = None
    timestamp: str | None = None
    timestamp_path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.seconds == 0:  # 0 is falsy but a valid wait
            out["Seconds"] = 0
        return out


@dataclass
class Parallel(_Flow):
    kind: ClassVar[str] = "Parallel"
    parameters: dict[str, Any] | None = None
    branches: list[ScopeMachine] = field(default_factory=list)
    result_selector: dict[str, Any] | None = None
    result_path: str | None = None
    retry: list[dict[str, Any]] = field(default_factory=list)
    catch: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Map(_Flow):
    kind: ClassVar[str] = "Map"
    items_path: str | None = None
    item_reader: dict[str, Any] | None = None
    item_selector: dict[str, Any] | None = None
    max_concurrency: int | None = None
    tolerated_failure_count: int | None = None
    tolerated_failure_percentage: int | None = None
    item_processor: ScopeMachine | None = None
    result_writer: dict[str, Any] | None = None
    result_selector: dict[str, Any] | None = None
    result_path: str | None = None
    retry: list[dict[str, Any]] = field(default_factory=list)
    catch: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if "ItemProcessor" in out:
            out["ItemProcessor"] = {"ProcessorConfig": {"Mode": "INLINE"}, **out["ItemProcessor"]}
        return out


@dataclass
class DistributedMap(Map):
    """A Map whose items run as child workflow executions (``Mode: DISTRIBUTED``), each with
    its own execution history, so the parent's history stays a few events long. (The
    distributed-only fields are :class:`Map`'s, in specification order; an inline Map never
    sets them.)"""

    execution_type: ClassVar[str] = "STANDARD"

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        processor = out["ItemProcessor"]
        processor["ProcessorConfig"] = {"Mode": "DISTRIBUTED", "ExecutionType": self.execution_type}
        return out


@dataclass
class Succeed(State):
    kind: ClassVar[str] = "Succeed"


@dataclass
class Fail(State):
    kind: ClassVar[str] = "Fail"
    error: str | None = None
    cause: str | None = None
    error_path: str | None = None
    cause_path: str | None = None


def targets(state: State) -> list[str]:
    """The state names ``state`` can go to next in its scope (Next, Default, the Choices'
    Next and the Catchers' Next)."""
    found: list[str] = []
    for name in (getattr(state, "next", None), getattr(state, "default", None)):
        if name:
            found.append(name)
    for rule in [*getattr(state, "choices", []), *getattr(state, "catch", [])]:
        if rule.get("Next"):
            found.append(rule["Next"])
    return found


@dataclass
class ScopeMachine:
    """A ``StartAt`` + ``States`` pair: the state machine, a branch or an item processor."""

    start_at: str
    states: dict[str, State] = field(default_factory=dict)

    def add(self, name: str, state: State) -> None:
        if name in self.states:
            raise ValueError(f"state name '{name}' is used twice")
        self.states[name] = state

    def reachable(self) -> set[str]:
        """The names of the states a run of this scope can enter, from ``start_at`` on."""
        seen, stack = {self.start_at}, [self.start_at]
        while stack:
            state = self.states.get(stack.pop())
            for name in targets(state) if state is not None else []:
                if name not in seen:
                    seen.add(name)
                    stack.append(name)
        return seen

    def to_dict(self) -> dict[str, Any]:
        return {
            "StartAt": self.start_at,
            "States": {name: state.to_dict() for name, state in self.states.items()},
        }


def carry_through(machine: ScopeMachine, name: str) -> None:
    """Carry the document field ``name`` (``saga``, ``run_flags``) through every state that
    rebuilds the whole state document, at any depth: a Parallel's ``ResultSelector`` (which
    reads the first branch's copy, ``$[0]``) and the ``Pass`` that merges a wide Parallel's
    parts. Such a state names ``run.$`` at its top and writes the whole document
    (``ResultPath`` ``$``); the field must be present wherever the state runs (each caller
    sets it in the machine's first state)."""
    for state in machine.states.values():
        for attr in ("result_selector", "parameters"):
            rebuilt = getattr(state, attr, None)
            if (
                isinstance(rebuilt, dict)
                and getattr(state, "result_path", None) in (None, "$")
                and isinstance(rebuilt.get("run.$"), str)
            ):
                prefix = rebuilt["run.$"].removesuffix(".run")
                rebuilt[f"{name}.$"] = f"{prefix}.{name}"
        for branch in getattr(state, "branches", None) or []:
            carry_through(branch, name)
