"""The agent step: a model in a tool loop, with its gating enforced in code.

Each turn sends the conversation to the model; each tool call it asks for is checked against
the step's toolbox (:mod:`relayflow.ai.tools`) and, when permitted, runs through the same code
as a ``tool`` step (the step's effects, :mod:`relayflow.steps.effects`: SSRF guard, breaker;
in a dry run only recorded). A refused call never runs: the model gets an error tool-result
and the output records the refusal.

Idempotency: every model turn and every tool call is recorded (:mod:`relayflow.steps.
idempotency`) under the step execution's identity plus ``turn<n>.model`` or
``turn<n>.call.<call id>``. A duplicate or retried invocation replays the recorded turns, so it
sends the same tool calls with the same ids, and replays their recorded results: no tool runs
twice for one step execution. They are recorded as *parts* of the step (``run_recorded(…,
part=True)``), so a retry of the step (a later attempt of the same execution) replays them too
rather than taking them over the way it takes over a whole step's result. The final answer
is recorded as one more part (``result``): the step's result is never recorded whole (a
suspended agent is invoked again for the same step execution), and this record is how an
Express run's timeline shows the step's output.

With ``output_schema`` or ``outcomes`` the model answers through the ``final_answer`` tool,
whose schema holds the response (``output_schema``, else a string) and the outcome (one of the
outcome names). A wrong answer gets one corrective turn, then ``Relayflow.AgentOutputInvalid``.

A call to a ``workflow.<id>`` tool suspends the loop the same way as an approval does: the
output names the child run to start (branch ``awaiting_workflow``), the compiled
``startExecution.sync:2`` state runs it, and the next invocation resumes with the child's result
at ``steps.<key>.workflow`` (:mod:`relayflow.steps.agent_workflows`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

from relayflow.ai.messages import (
    Message,
    ModelRequest,
    ModelTurn,
    ToolCall,
    Usage,
    text_block,
    tool_result_block,
)
from relayflow.ai.tools import FINAL_ANSWER, Toolbox
from relayflow.definition.agent_tools import workflow_tool_id
from relayflow.errors import (
    AgentMaxTurns,
    AgentOutputInvalid,
    AgentTokenBudget,
    InvalidArgsError,
    RelayflowError,
)
from relayflow.expressions import render
from relayflow.expressions.templates import text_form
from relayflow.steps.agent_workflows import (
    child_outcome,
    child_pending,
    recorded_call,
    refuse_child,
    safe_call_id,
)
from relayflow.steps.effects import Effects
from relayflow.steps.idempotency import RESULT_PART, StepIdentity, run_recorded, step_identity
from relayflow.steps.task import parse_task, result

#: Output tokens per model turn when the step sets no max_tokens.
DEFAULT_MAX_TOKENS = 1024


def answer_schema(config: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``final_answer`` tool's schema, or ``None`` when the step answers in plain text."""
    outcomes = config.get("outcomes")
    schema = config.get("output_schema")
    if not outcomes and schema is None:
        return None
    properties: dict[str, Any] = {"response": schema if schema is not None else {"type": "string"}}
    required = ["response"]
    if outcomes:
        properties["outcome"] = {"type": "string", "enum": list(outcomes)}
        required.append("outcome")
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def run(event: Any, context: Any, effects: Effects) -> dict[str, Any]:
    """Run the agent's loop; the output is ``{response, outcome, tool_calls, usage, turns,
    stop_reason}``. A call to a tool in ``require_approval_tools`` suspends the loop: the
    output is then ``{status: awaiting_approval, pending, conversation, …}`` with branch
    ``awaiting_approval``, and the next invocation (after the compiled approval state) resumes
    it with the decision at ``steps.<key>.approval``. A call to a workflow tool suspends it
    with branch ``awaiting_workflow`` until the compiled child run ends (its result at
    ``steps.<key>.workflow``)."""
    task = parse_task(event)
    config = task.step.config
    model = config.get("model")
    if not isinstance(model, str):
        raise InvalidArgsError(f"agent step {task.step.key!r} names no model")
    loop = AgentLoop(
        config=config,
        doc=task.doc,
        identity=step_identity(event),
        record=lambda identity, thunk: run_recorded(
            identity, lambda _e, _c: thunk(), event, context, part=True
        ),
        effects=effects,
        step_key=task.step.key,
    )
    previous = (task.doc.get("steps") or {}).get(task.step.key)
    try:
        output = loop.resume(previous) if _waiting(previous) else loop.start()
    except Suspended as pause:
        return result(pause.output, pause.branch)
    # The answer is recorded as one more part: an Express run keeps no history, and this
    # record is how its timeline shows the step's output. (The step's result is not recorded
    # whole: a suspended agent is invoked again for the same step execution.)
    answer = output
    return result(loop.once(RESULT_PART, lambda: answer), task=task)


AWAITING = "awaiting_approval"
AWAITING_WORKFLOW = "awaiting_workflow"
#: Where the compiled state that answers each suspension puts its result.
ANSWERS = {AWAITING: "approval", AWAITING_WORKFLOW: "workflow"}


class Suspended(Exception):
    """The loop stopped at a call that needs approval or a child run; ``output`` is the
    step's output and ``branch`` says which."""

    def __init__(self, output: dict[str, Any], branch: str = AWAITING) -> None:
        super().__init__(branch)
        self.output = output
        self.branch = branch


def _waiting(previous: Any) -> bool:
    """Whether the step's last result is a suspension that a decision (or a child run's
    result) now answers."""
    if not isinstance(previous, dict) or previous.get("branch") not in ANSWERS:
        return False
    output = previous.get("output")
    return (
        isinstance(output, dict)
        and isinstance(output.get("conversation"), dict)
        and isinstance(previous.get(ANSWERS[previous["branch"]]), dict)
    )


@dataclasses.dataclass
class AgentLoop:
    """One run of an agent step. ``record(identity, thunk)`` runs ``thunk`` at most once per
    identity (the step-results table); without an identity nothing is recorded."""

    config: Mapping[str, Any]
    doc: Mapping[str, Any]
    identity: StepIdentity | None
    record: Callable[[StepIdentity, Callable[[], Any]], Any]
    effects: Effects
    step_key: str = "agent"

    def __post_init__(self) -> None:
        from relayflow.ai.providers import provider_for

        connection = {k: self.config.get(k) for k in ("base_url", "api_key")}
        self.provider, self.model_id = provider_for(str(self.config["model"]), connection)
        self.schema = answer_schema(self.config)
        self.box = Toolbox.build(self.config, self.config.get("http_tools") or {}, self.schema)
        self.approvals = set(self.config.get("require_approval_tools") or [])
        self.usage = Usage()
        self.calls: list[dict[str, Any]] = []
        self.messages: list[Message] = []
        self.system: str | None = None
        self.turn = 0
        self.limit = int(self.config.get("max_turns") or 5)
        self.corrected = False

    # ------------------------------------------------------------------ the loop

    def start(self) -> dict[str, Any]:
        system = self.config.get("system")
        self.system = text_form(render(system, self.doc)) if system else None
        prompt = text_form(render(self.config.get("prompt", ""), self.doc))
        self.messages = [{"role": "user", "content": [text_block(prompt)]}]
        return self.advance()

    def advance(self) -> dict[str, Any]:
        messages = self.messages
        while self.turn < self.limit:
            self.turn += 1
            turn = self.turn
            answer = self.model_turn(turn, messages, self.system)
            messages.append({"role": "assistant", "content": answer.content})
            calls = answer.tool_calls
            final = next((c for c in calls if c.name == FINAL_ANSWER), None)
            if self.schema is not None and final is not None:
                problem = self.answer_problem(final.input)
                if problem is None:
                    return self.output(
                        final.input.get("response"), final.input.get("outcome"), turn, answer
                    )
                if self.corrected:
                    raise self.invalid(problem)
                self.corrected, self.limit = True, self.limit + 1
                messages.append({"role": "user", "content": self.not_run(calls, final, problem)})
                continue
            if not calls:
                if self.schema is None:
                    return self.output(answer.text, None, turn, answer)
                problem = (
                    f"the model answered in text instead of calling {FINAL_ANSWER}"
                    if answer.text.strip()
                    else "the model's answer was empty (no text and no tool call)"
                )
                if self.corrected:
                    raise self.invalid(problem)
                self.corrected, self.limit = True, self.limit + 1
                messages.append({"role": "user", "content": [text_block(self.correction(answer))]})
                continue
            self.finish_calls(turn, calls, [])
        raise AgentMaxTurns(
            f"the agent still asked for tools after {self.limit} turn(s) (max_turns "
            f"{self.config.get('max_turns') or 5})",
            turns=self.limit,
            tool_calls=len(self.calls),
            usage=self.usage_output(),
        )

    def finish_calls(self, turn: int, calls: list[ToolCall], results: list[dict[str, Any]]) -> None:
        """Run (or refuse) the rest of a turn's calls; a call that needs approval or a child
        run suspends the loop there. The turn's results go back to the model as one
        message."""
        for index, call in enumerate(calls):
            tool, refusal = self.box.check(call.name)
            if refusal is None and tool is not None and workflow_tool_id(tool) is not None:
                # A child that already ran for this call (a run restarted under its id)
                # is not started again: its recorded result stands.
                replayed = recorded_call(self, turn, call)
                if replayed is not None:
                    results.append(self.settle(turn, call, tool, replayed))
                    continue
                refused = refuse_child(self, tool, call)
                if refused is not None:
                    results.append(self.settle(turn, call, tool, refused))
                    continue
                if tool not in self.approvals:
                    self.suspend(turn, calls[index:], results, tool, AWAITING_WORKFLOW)
            if refusal is None and tool in self.approvals:
                self.suspend(turn, calls[index:], results, tool)
            results.append(self.tool_result(turn, call))
        self.messages.append({"role": "user", "content": results})

    # ------------------------------------------------------------------ approvals

    def suspend(
        self,
        turn: int,
        calls: list[ToolCall],
        results: list[dict[str, Any]],
        tool: str,
        branch: str = AWAITING,
        approved_by: Any = None,
    ) -> None:
        """Save the conversation to S3 and stop: the compiled approval state asks a person,
        or the compiled child-run state runs the workflow the call names."""
        from relayflow.steps.agent_store import save_conversation

        gated = calls[0]
        state = {
            "messages": self.messages,
            "system": self.system,
            "turn": turn,
            "limit": self.limit,
            "corrected": self.corrected,
            "usage": [self.usage.input_tokens, self.usage.output_tokens],
            "calls": self.calls,
            "pending_calls": [dataclasses.asdict(c) for c in calls],
            "results": results,
        }
        scope = f"{turn}.{safe_call_id(gated.id)}"
        pending: dict[str, Any] = {
            "turn": turn,
            "id": gated.id,
            "tool": tool,
            "input": gated.input,
            "scope": scope,
        }
        if branch == AWAITING_WORKFLOW:
            scope = f"{scope}.run"
            pending.update(child_pending(self, turn, gated, tool, approved_by))
        raise Suspended(
            {
                "status": branch,
                "pending": pending,
                "conversation": save_conversation(
                    self.doc, self.step_key, self.identity, scope, state
                ),
                "tool_calls": self.calls,
                "usage": self.usage_output(),
            },
            branch,
        )

    def resume(self, previous: Mapping[str, Any]) -> dict[str, Any]:
        """Continue a suspended loop. After an approval: run the gated call when the decision
        approves it (it runs once: recorded like any call; a workflow tool suspends again for
        its child run), else tell the model it was refused. After a child run: its output
        (or failure) is the call's result."""
        waiting = previous["output"]
        state = waiting["conversation"]
        self.messages = state["messages"]
        self.system = state.get("system")
        self.turn, self.limit = int(state["turn"]), int(state["limit"])
        self.corrected = bool(state.get("corrected"))
        self.usage = Usage(*state["usage"])
        self.calls = state["calls"]
        calls = [ToolCall(**c) for c in state["pending_calls"]]
        gated, rest = calls[0], calls[1:]
        results = list(state["results"])
        if previous["branch"] == AWAITING_WORKFLOW:
            pending = waiting["pending"]
            outcome = self.once(
                f"turn{self.turn}.call.{safe_call_id(gated.id)}",
                lambda: child_outcome(pending, previous["workflow"]),
            )
            results.append(
                self.settle(self.turn, gated, pending["tool"], outcome, pending.get("approved_by"))
            )
            self.finish_calls(self.turn, rest, results)
            return self.advance()
        decision = previous["approval"]
        responder = decision.get("responder")
        approved_tool = self.box.resolve(gated.name)
        if (
            decision.get("approved") is True
            and approved_tool is not None
            and workflow_tool_id(approved_tool) is not None
        ):
            self.suspend(self.turn, calls, results, approved_tool, AWAITING_WORKFLOW, responder)
        if decision.get("approved") is True:
            results.append(self.tool_result(self.turn, gated, approved_by=responder))
        else:
            tool = self.box.resolve(gated.name) or gated.name
            message = f"a person rejected the call of tool {tool!r}; do not call it again"
            self.calls.append(
                {
                    "turn": self.turn,
                    "id": gated.id,
                    "tool": tool,
                    "input": gated.input,
                    "status": "rejected",
                    "error": message,
                    "decided_by": responder,
                }
            )
            results.append(
                tool_result_block(
                    gated.id, {"error": "rejected", "message": message}, is_error=True
                )
            )
        self.finish_calls(self.turn, rest, results)
        return self.advance()

    def model_turn(self, turn: int, messages: list[Message], system: str | None) -> ModelTurn:
        request = ModelRequest(
            model_id=self.model_id,
            messages=[dict(m) for m in messages],
            system=system,
            tools=self.box.specs,
            max_tokens=int(self.config.get("max_tokens") or DEFAULT_MAX_TOKENS),
            temperature=self.config.get("temperature"),
        )

        def call() -> dict[str, Any]:
            return self.provider.complete(request).to_dict()

        def guarded() -> dict[str, Any]:
            breaker = self.config.get("breaker")
            if not breaker:
                return call()
            from relayflow.reliability.breakers import guard_tool_call

            return guard_tool_call(self.doc, f"model.{self.provider.name}", breaker, call)

        answer = ModelTurn.from_dict(self.once(f"turn{turn}.model", guarded))
        self.usage = self.usage + answer.usage
        budget = self.config.get("token_budget")
        if budget and self.usage.total_tokens > int(budget):
            raise AgentTokenBudget(
                f"the agent used {self.usage.total_tokens} tokens in {turn} turn(s), over its "
                f"token_budget of {budget}",
                usage=self.usage_output(),
                turns=turn,
            )
        return answer

    def tool_result(self, turn: int, call: ToolCall, *, approved_by: Any = None) -> dict[str, Any]:
        """Run (or refuse) one tool call; the tool-result block the model gets back."""
        tool, refusal = self.box.check(call.name)
        entry: dict[str, Any] = {
            "turn": turn,
            "id": call.id,
            "tool": tool or call.name,
            "input": call.input,
        }
        if approved_by is not None:
            entry["approved_by"] = approved_by
        if refusal is not None:
            self.calls.append({**entry, "status": "refused", "error": refusal})
            return tool_result_block(
                call.id, {"error": "refused", "message": refusal}, is_error=True
            )
        assert tool is not None
        outcome = self.once(
            f"turn{turn}.call.{safe_call_id(call.id)}", lambda: self.execute(tool, call)
        )
        return self.settle(turn, call, tool, outcome, approved_by)

    def settle(
        self,
        turn: int,
        call: ToolCall,
        tool: str,
        outcome: Mapping[str, Any],
        approved_by: Any = None,
    ) -> dict[str, Any]:
        """Record a call's outcome (``{ok, output}`` or ``{ok: false, error}``) in the
        output's ``tool_calls``; the tool-result block the model gets back."""
        entry: dict[str, Any] = {"turn": turn, "id": call.id, "tool": tool, "input": call.input}
        if approved_by is not None:
            entry["approved_by"] = approved_by
        if outcome.get("run_id"):
            entry["run_id"] = outcome["run_id"]
        if outcome.get("ok"):
            self.calls.append({**entry, "status": "succeeded", "output": outcome["output"]})
            return tool_result_block(call.id, outcome["output"])
        self.calls.append({**entry, "status": "failed", "error": outcome["error"]})
        return tool_result_block(call.id, outcome["error"], is_error=True)

    def execute(self, tool: str, call: ToolCall) -> dict[str, Any]:
        """One permitted call, through the tool step's code. An error retrying cannot fix
        goes back to the model; a retryable one (transient, throttled, breaker open) fails the
        step, so its retry policy applies and the recorded turns replay."""
        http_tools = self.config.get("http_tools") or {}
        http_tool = http_tools.get(tool.split(".")[1]) if tool.startswith("http.") else None
        if http_tool is not None and tool.count(".") == 2:
            operation = tool.split(".")[2]
            http_tool = {**http_tool, "operations": {operation: http_tool["operations"][operation]}}
        try:
            output = self.effects.call_tool(
                tool, call.input, self.doc, http_tool=http_tool, breaker=self.config.get("breaker")
            )
        except RelayflowError as exc:
            if exc.retryable:
                raise
            return {"ok": False, "error": {"error": exc.error_name, "message": exc.message}}
        return {"ok": True, "output": output}

    # ------------------------------------------------------------------ answers

    def answer_problem(self, answer: Any) -> str | None:
        from relayflow.definition.tenant_schema import validator as schema_validator

        assert self.schema is not None
        validator = schema_validator(self.schema)
        errors = sorted(validator.iter_errors(answer), key=lambda e: list(e.path))
        if not errors:
            return None
        first = errors[0]
        where = "/".join(str(p) for p in first.path) or "(root)"
        return f"final_answer at {where}: {first.message}"

    def not_run(self, calls: list[ToolCall], final: ToolCall, problem: str) -> list[dict[str, Any]]:
        """Tool results for a turn whose final answer was wrong: the problem for the answer,
        "not run" for any other call of that turn (every call needs a result)."""
        blocks = [
            tool_result_block(
                final.id,
                {"error": "invalid answer", "message": f"{problem}. Call {FINAL_ANSWER} again."},
                is_error=True,
            )
        ]
        for call in calls:
            if call is not final:
                blocks.append(
                    tool_result_block(
                        call.id, {"error": "not run with a final answer"}, is_error=True
                    )
                )
        return blocks

    def correction(self, answer: ModelTurn) -> str:
        """The corrective user turn after an answer without a final_answer call: it names
        what was wrong. (An empty answer stays in the recorded conversation, but the
        providers never send an empty assistant turn: :func:`relayflow.ai.messages.
        wire_messages` drops it, so this text joins the user turn before it.)"""
        what = (
            f"Your last answer was text, not a call of the {FINAL_ANSWER} tool."
            if answer.text.strip()
            else "Your last answer was empty: it had no text and no tool call."
        )
        return (
            f"{what} Give your answer by calling the {FINAL_ANSWER} tool with arguments "
            f"matching its schema: {json.dumps(self.schema)}"
        )

    def invalid(self, problem: str) -> AgentOutputInvalid:
        return AgentOutputInvalid(
            f"the agent's answer is invalid after one corrective turn: {problem}",
            usage=self.usage_output(),
        )

    def usage_output(self) -> dict[str, Any]:
        from relayflow.ai.prices import estimate_cost

        return {
            "model": f"{self.provider.name}:{self.model_id}",
            "input_tokens": self.usage.input_tokens,
            "output_tokens": self.usage.output_tokens,
            "total_tokens": self.usage.total_tokens,
            "estimated_cost_usd": estimate_cost(self.provider.name, self.model_id, self.usage),
        }

    def output(self, response: Any, outcome: Any, turns: int, last: ModelTurn) -> dict[str, Any]:
        return {
            "response": response,
            "outcome": outcome,
            "tool_calls": self.calls,
            "usage": self.usage_output(),
            "turns": turns,
            "stop_reason": last.stop_reason,
        }

    # ------------------------------------------------------------------ recording

    def once(self, suffix: str, thunk: Callable[[], Any]) -> Any:
        if self.identity is None:
            return thunk()
        return self.record(self.identity.part(suffix), thunk)
