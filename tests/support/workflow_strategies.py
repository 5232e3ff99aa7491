"""Hypothesis strategies for VALID workflow definitions (plain data, as a YAML file parses).

:func:`workflow_definitions` covers every step type this build accepts (noop, transform,
tool with AWS and declared HTTP tools, code, custom with and without branches, webhook_out,
condition native and in its Lambda, delay by seconds (long ones too) and until, parallel,
for_each, approval, waitpoint, wait_for_event, sub_workflow, agent with tools, gating and
outcomes, llm_batch) and their options: retry policies (fixed, linear, exponential, jitter, caps,
retry_on, ``none``), timeouts, on_failure routes and the workflow-wide error
route, the workflow's ``defaults`` block (retry, timeout, delay; a delay without seconds),
``parallel`` with ``settle: all`` and ``fail_when``, saga compensation (``compensate``,
inline or by step key), cycles, concurrency and rate limits, breakers, and user data of every
JSON shape (keys ending in ``.$``, very large and non-finite numbers, long strings, deep
nesting).

Definitions are valid by construction: routes stay inside their scope, every step is
reachable, every cycle has a way out, settings a step type cannot honour are left out. The
generator does not avoid inputs that validation accepts but the compiler gets wrong: finding
those is its purpose.

``runnable=True`` draws the part of the space that runs on the local runtime without external
resources, for fuzz runs: noop, transform, condition, delay, parallel and for_each steps (no
tool, webhook_out, custom, approval, waitpoint or sub_workflow, and no code step, whose
sandbox process per call is slow), short delays and retries, cycles bounded at a dozen
steps, templates that read only the trigger (:data:`RUNNABLE_TRIGGER`).

Use with ``@given`` or ``corpus.draw_corpus``, which collects a deterministic list.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st
from workflow_vocabulary import (
    AGENT_MODELS,
    AWS_TOOLS,
    BATCH_MODELS,
    CODE_BODIES,
    ERROR_NAMES,
    HTTP_METHODS,
    KEY_TEXT,
    LAMBDA_CONDITIONS,
    LAMBDA_EXPRESSIONS,
    LONG_DELAY,
    MAX_WAIT_SECONDS,
    NATIVE_CONDITIONS,
    RARE,
    RUN_PATHS,
    RUNNABLE_TRIGGER,
    TEXT,
    TRIGGER_PATHS,
    USER_KEYS,
    WAIT_MATCHES,
    finite_numbers,
)

#: Kept importable from here (tests import them with the strategies).
__all__ = [
    "AGENT_MODELS",
    "AWS_TOOLS",
    "BATCH_MODELS",
    "CODE_BODIES",
    "ERROR_NAMES",
    "HTTP_METHODS",
    "KEY_TEXT",
    "LAMBDA_CONDITIONS",
    "LAMBDA_EXPRESSIONS",
    "LONG_DELAY",
    "MAX_WAIT_SECONDS",
    "NATIVE_CONDITIONS",
    "RARE",
    "RUNNABLE_TRIGGER",
    "RUN_PATHS",
    "TEXT",
    "TRIGGER_PATHS",
    "USER_KEYS",
    "WAIT_MATCHES",
    "finite_numbers",
    "workflow_definitions",
]


def _rare(draw: Callable[[st.SearchStrategy[Any]], Any]) -> bool:
    return bool(draw(st.integers(0, RARE - 1)) == 0)


@dataclass(frozen=True)
class _Slot:
    """Where a step sits: its scope's keys in chain order, its index, the next key."""

    scope: list[str]
    index: int
    depth: int
    #: Keys a template may name (the steps that can run before this one).
    others: list[str]

    @property
    def key(self) -> str:
        return self.scope[self.index]

    @property
    def next(self) -> str | None:
        return self.scope[self.index + 1] if self.index + 1 < len(self.scope) else None


class _Builder:
    """Draws one definition: scopes of chained steps, with extra routes inside each scope.

    Each scope is a chain: step *i* always routes to step *i + 1* (on_success, a condition
    branch, a custom or approval branch), so every step is reachable. A second route may go
    to any step of the scope; one that goes back closes a cycle, whose way out is the chain
    route of its last step. The last step of a scope routes back only from a condition with
    one branch missing (which is its way out).
    """

    #: Steps past which no more parallel or for_each steps are drawn.
    BUDGET = 90

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any], runnable: bool) -> None:
        self.draw = draw
        self.runnable = runnable
        self.steps: dict[str, dict[str, Any]] = {}
        self.http_tools: dict[str, dict[str, Any]] = {}
        self.prefix = draw(st.sampled_from(["s", "step_", "charge_customer_", "k" * 58]))

    # -------------------------------------------------------------- values

    def new_key(self) -> str:
        key = f"{self.prefix}{len(self.steps)}"
        self.steps[key] = {}
        return key

    def path(self, others: list[str]) -> str:
        plain = TRIGGER_PATHS + RUN_PATHS
        if self.runnable or not others or self.draw(st.booleans()):
            return self.draw(st.sampled_from(plain))
        key = self.draw(st.sampled_from(others))
        return self.draw(st.sampled_from([f"steps.{key}.output", f"steps.{key}.output.value"]))

    def template_string(self, others: list[str], *, native: bool = False) -> str:
        kinds = ["literal", "path", "mixed"] + ([] if native else ["expression"])
        kind = self.draw(st.sampled_from(kinds))
        if kind == "literal":
            text = self.draw(TEXT)
            # A quote in literal text has no native form in a sub_workflow input.
            return text.replace("'", "") if native else text
        if kind == "path":
            return f"{{{{ {self.path(others)} }}}}"
        if kind == "mixed":
            before = self.draw(st.text(alphabet=string.ascii_letters + " -:/", max_size=8))
            return f"{before}{{{{ {self.path(others)} }}}}!"
        return f"{{{{ {self.draw(st.sampled_from(LAMBDA_EXPRESSIONS))} }}}}"

    def json_value(self, others: list[str], depth: int = 3) -> Any:
        """Any JSON value a user may write, strings possibly templated."""
        kinds = ["null", "bool", "number", "string", "string"]
        if depth > 0:
            kinds += ["list", "object"]
        kind = self.draw(st.sampled_from(kinds))
        if kind == "null":
            return None
        if kind == "bool":
            return self.draw(st.booleans())
        if kind == "number":
            if not self.runnable and _rare(self.draw):
                # YAML's .inf / .nan parse to these; a definition may hold them.
                return self.draw(st.sampled_from([float("inf"), float("-inf"), float("nan")]))
            return self.draw(finite_numbers())
        if kind == "string":
            return self.template_string(others)
        if kind == "list":
            return [self.json_value(others, depth - 1) for _ in range(self.draw(st.integers(0, 3)))]
        return self.json_object(others, depth - 1)

    def json_object(self, others: list[str], depth: int = 2) -> dict[str, Any]:
        keys = self.draw(st.lists(USER_KEYS, max_size=4, unique=True))
        return {k: self.json_value(others, depth) for k in keys}

    def native_input(self, others: list[str]) -> dict[str, Any]:
        """A sub_workflow input: literals and plain-path placeholders only (built in ASL)."""
        keys = self.draw(
            st.lists(KEY_TEXT.filter(lambda k: not k.endswith(".$")), max_size=3, unique=True)
        )
        out: dict[str, Any] = {}
        for k in keys:
            kind = self.draw(st.sampled_from(["int", "bool", "text"]))
            if kind == "int":
                out[k] = self.draw(st.integers(-1000, 1000))
            elif kind == "bool":
                out[k] = self.draw(st.booleans())
            else:
                out[k] = self.template_string(others, native=True)
        return out

    def timestamp(self) -> str:
        if self.runnable:
            return self.draw(st.sampled_from(["2020-01-01T00:00:00Z", "{{ trigger.when }}"]))
        real = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 30)).map(
            lambda d: d.replace(tzinfo=UTC).isoformat().replace("+00:00", "Z")
        )
        offset = st.builds(
            lambda d, m: d.replace(tzinfo=timezone(timedelta(minutes=m))).isoformat(),
            st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)),
            st.integers(-23 * 60, 23 * 60),
        )
        # Strings that pass the definition's timestamp pattern, whatever their digits mean.
        patterned = st.from_regex(
            r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})", fullmatch=True
        )
        if _rare(self.draw):
            return self.draw(patterned)
        return self.draw(st.one_of(real, offset, st.just("{{ trigger.when }}")))

    def retry(self, *, linear: bool) -> dict[str, Any]:
        draw = self.draw
        backoff = draw(st.sampled_from(["fixed", "exponential"] + (["linear"] if linear else [])))
        high = 10 if self.runnable else 86_400
        base = draw(st.one_of(st.integers(1, 10), st.integers(1, high)))
        policy: dict[str, Any] = {
            "max_attempts": draw(st.integers(1, 3 if self.runnable else 25)),
            "backoff": backoff,
            "base_seconds": base,
        }
        if draw(st.booleans()):
            policy["max_delay_seconds"] = draw(st.integers(base, high))
        if backoff != "linear" and draw(st.booleans()):
            policy["jitter"] = True
        retry_on = draw(
            st.one_of(
                st.none(),
                st.just(["States.ALL"]),
                st.lists(st.sampled_from(ERROR_NAMES), min_size=1, max_size=3, unique=True),
            )
        )
        if retry_on is not None:
            policy["retry_on"] = retry_on
        return policy

    # -------------------------------------------------------------- options

    def options(self, step: dict[str, Any], slot: _Slot) -> None:
        """Policies and a failure route, as far as the step type takes them
        (relayflow.validation.validate.NOT_APPLICABLE)."""
        draw, kind = self.draw, step["type"]
        if kind in ("noop", "delay"):
            return
        # Each policy on about a third of the steps, so native forms stay common too.
        if kind not in ("approval", "waitpoint", "wait_for_event") and draw(st.integers(0, 2)) == 0:
            linear = kind not in ("parallel", "for_each", "llm_batch")
            # `none`: one attempt, the workflow's default policy opted out of.
            step["retry"] = "none" if draw(st.integers(0, 4)) == 0 else self.retry(linear=linear)
        if kind not in ("parallel", "for_each") and draw(st.integers(0, 2)) == 0:
            low, high = (10, 30) if self.runnable else (1, 31_536_000)
            step["timeout_seconds"] = draw(st.one_of(st.integers(low, high), st.just(low)))
        if kind in ("transform", "condition", "tool", "webhook_out", "custom", "agent"):
            if draw(st.integers(0, 4)) == 0:
                step["concurrency"] = {"limit": draw(st.integers(1, 10_000))}
                if draw(st.booleans()):
                    step["concurrency"]["key"] = self.template_string(slot.others)
            if draw(st.integers(0, 4)) == 0:
                step["rate_limit"] = {
                    "limit": draw(st.integers(1, 1_000_000)),
                    "window_seconds": draw(st.integers(1, 86_400)),
                }
        # A route back closes a cycle whose way out is the next step: not from the last step.
        if slot.next is not None and draw(st.integers(0, 3)) == 0:
            step["on_failure"] = draw(st.sampled_from([k for k in slot.scope if k != slot.key]))

    def extra_target(self, slot: _Slot) -> str | None:
        """A second route: none, forward, or backward (a cycle). None from the last step."""
        if slot.next is None:
            return None
        return self.draw(st.one_of(st.none(), st.sampled_from(slot.scope)))

    # -------------------------------------------------------------- steps

    def kinds(self, depth: int) -> list[str]:
        kinds = ["noop", "transform", "condition", "delay"]
        if depth < 2 and len(self.steps) < self.BUDGET:
            kinds += ["parallel", "for_each"]
        if not self.runnable:
            # Runnable definitions leave out the code step too: each call starts a sandbox
            # process, which makes the fuzz runs slow without adding runtime paths.
            kinds += ["code", "tool", "custom", "webhook_out", "approval", "waitpoint"]
            kinds += ["sub_workflow", "agent", "llm_batch", "wait_for_event"]
        return kinds

    def scope(
        self,
        depth: int,
        size: int,
        kinds: list[str] | None = None,
        before: list[str] | None = None,
    ) -> list[str]:
        """Draw ``size`` chained steps; returns their keys, the entry first. A template may
        read the steps that can run before it: ``before`` (those ahead of the scope's own
        step, for a nested scope) and the earlier steps of the chain (validation refuses a
        read of a step no route leads from, rule ``read-before-run``)."""
        keys = [self.new_key() for _ in range(size)]
        for index in range(size):
            slot = _Slot(keys, index, depth, [*(before or []), *keys[:index]])
            kind = self.draw(st.sampled_from(kinds or self.kinds(depth)))
            self.steps[keys[index]] = self.step(kind, slot)
        return keys

    def step(self, kind: str, slot: _Slot) -> dict[str, Any]:
        step: dict[str, Any] = {"type": kind}
        if self.draw(st.integers(0, 5)) == 0:
            step["name"] = self.draw(TEXT)
        if kind not in ("condition", "approval", "custom") and slot.next is not None:
            step["on_success"] = slot.next
        getattr(self, f"fill_{kind}")(step, slot)
        self.options(step, slot)
        return step

    def fill_noop(self, step: dict[str, Any], slot: _Slot) -> None:
        return None

    def fill_transform(self, step: dict[str, Any], slot: _Slot) -> None:
        if self.draw(st.booleans()):
            step["mapping"] = self.json_object(slot.others)
        else:
            step["mapping"] = self.json_value(slot.others)

    def fill_condition(self, step: dict[str, Any], slot: _Slot) -> None:
        step["expression"] = self.draw(st.sampled_from(NATIVE_CONDITIONS + LAMBDA_CONDITIONS))
        other = self.extra_target(slot)
        if slot.next is None:
            # The last step: one branch back (or to itself), the other missing: the way out.
            other = self.draw(st.one_of(st.none(), st.sampled_from(slot.scope)))
        first, second = (slot.next, other) if self.draw(st.booleans()) else (other, slot.next)
        if first is None and second is None:
            first = slot.scope[0]  # back to the entry (or itself): a cycle left by on_false
        if first is not None:
            step["on_true"] = first
        if second is not None:
            step["on_false"] = second

    def fill_delay(self, step: dict[str, Any], slot: _Slot) -> None:
        if self.draw(st.booleans()):
            if self.runnable:
                step["seconds"] = self.draw(
                    st.one_of(st.integers(0, 5), st.just("{{ trigger.wait }}"))
                )
            elif _rare(self.draw):
                step["seconds"] = self.draw(st.integers(MAX_WAIT_SECONDS + 1, 10**10))
            else:
                step["seconds"] = self.draw(
                    st.one_of(
                        st.integers(0, 99_999_999),
                        st.integers(0, 60),
                        st.just("{{ trigger.wait }}"),
                        # Longer than any run may last, up to Step Functions' Wait limit.
                        st.integers(LONG_DELAY, MAX_WAIT_SECONDS),
                        st.just(MAX_WAIT_SECONDS),
                    )
                )
        elif self.draw(st.integers(0, 3)) == 0:
            return  # neither: the workflow's defaults.delay_seconds
        else:
            step["until"] = self.timestamp()

    def fill_code(self, step: dict[str, Any], slot: _Slot) -> None:
        step["code"] = self.draw(st.sampled_from(CODE_BODIES))
        if self.draw(st.booleans()):
            step["input"] = self.json_value(slot.others)
        if self.draw(st.booleans()):
            step["cpu_seconds"] = self.draw(st.integers(1, 60))

    def fill_parallel(self, step: dict[str, Any], slot: _Slot) -> None:
        count = self.draw(st.one_of(st.integers(1, 3), st.integers(1, 6 if self.runnable else 40)))
        size = 1 if count > 3 else 2
        step["branches"] = [
            self.scope(slot.depth + 1, size, before=slot.others)[0] for _ in range(count)
        ]
        settle = self.draw(st.sampled_from([None, "fail_fast", "all", "all"]))
        if settle is not None:
            step["settle"] = settle
        if settle == "all":
            fail_when = self.draw(st.sampled_from([None, "never", "any", "any"]))
            if fail_when is not None:
                step["fail_when"] = fail_when

    def fill_for_each(self, step: dict[str, Any], slot: _Slot) -> None:
        draw = self.draw
        paths = ["trigger.items", "trigger.nested.list"]
        if not self.runnable:
            paths += [f"steps.{k}.output" for k in slot.others[:3]]
        step["items"] = f"{{{{ {draw(st.sampled_from(paths))} }}}}"
        targets = ["noop", "transform"]
        if not self.runnable:
            targets += ["code", "tool", "webhook_out", "sub_workflow", "agent"]
        # One step, alone in its scope, that cannot route (the item processor).
        step["step"] = self.scope(slot.depth + 1, 1, targets, before=slot.others)[0]
        # An item step cannot route: no outcomes, no approval pause (which resumes the loop).
        for field in ("outcomes", "require_approval_tools", "approval_channels"):
            self.steps[step["step"]].pop(field, None)
        if draw(st.booleans()):
            # Runnable: within Standard's 25,000-event history (rule history-events, at
            # least 7 events per item); the validator corpus keeps the whole range.
            most = 3_000 if self.runnable else 40_000
            step["max_items"] = draw(st.one_of(st.integers(1, 10), st.integers(1, most)))
        if draw(st.booleans()):
            step["max_concurrency"] = draw(st.integers(0, 1000))
        if draw(st.booleans()):
            step["on_item_failure"] = draw(st.sampled_from(["fail", "continue"]))

    def fill_tool(self, step: dict[str, Any], slot: _Slot) -> None:
        draw = self.draw
        if draw(st.booleans()):
            tool = draw(st.sampled_from(sorted(AWS_TOOLS)))
            step["tool"] = tool
            step["args"] = {arg: self.json_value(slot.others, 2) for arg in AWS_TOOLS[tool]}
            for arg in ("table", "queue_url", "topic_arn", "bucket", "key"):
                if arg in step["args"]:
                    step["args"][arg] = draw(st.sampled_from(["orders", "{{ trigger.name }}"]))
        else:
            name, operation = self.http_tool()
            if operation is None:
                step["tool"] = f"http.{name}"
                step["args"] = {
                    "method": draw(st.sampled_from(HTTP_METHODS)),
                    "path": f"/items/{{{{ {self.path(slot.others)} }}}}",
                    "body": self.json_value(slot.others, 2),
                }
            else:
                step["tool"] = f"http.{name}.{operation}"
                step["args"] = self.json_object(slot.others)
        if draw(st.integers(0, 3)) == 0:
            step["breaker"] = draw(
                st.one_of(
                    st.none(),
                    st.fixed_dictionaries(
                        {
                            "failure_threshold": st.integers(1, 1000),
                            "cooldown_seconds": st.integers(1, 86_400),
                        }
                    ),
                )
            )

    def http_tool(self) -> tuple[str, str | None]:
        """A declared HTTP tool (new or reused) and maybe one of its operations."""
        draw = self.draw
        if self.http_tools and draw(st.booleans()):
            name = draw(st.sampled_from(sorted(self.http_tools)))
        else:
            name = f"api{len(self.http_tools)}"
            operations: dict[str, Any] = {}
            for op in draw(st.lists(st.sampled_from(["create", "fetch", "sync"]), unique=True)):
                body: Any = {"id": "{{ args.id }}", "data": self.json_value([], 2)}
                if draw(st.integers(0, 15)) == 0:
                    # A large declaration: every step that calls the tool carries it.
                    body = {"blob": "x" * draw(st.integers(1_000, 200_000)), "id": "{{ args.id }}"}
                operations[op] = {
                    "method": draw(st.sampled_from(HTTP_METHODS)),
                    "path": "/v1/{{ args.id }}",
                    "body": body,
                }
            tool: dict[str, Any] = {"base_url": "https://api.example.com/v1"}
            if operations:
                tool["operations"] = operations
            if draw(st.booleans()):
                tool["auth"] = {"type": "bearer", "token": {"name": "token"}}
            self.http_tools[name] = tool
        operations_declared = sorted(self.http_tools[name].get("operations", {}))
        return name, draw(st.sampled_from([None, *operations_declared]))

    def fill_webhook_out(self, step: dict[str, Any], slot: _Slot) -> None:
        draw = self.draw
        step["url"] = f"https://hooks.example.com/{self.template_string(slot.others)}"
        step["method"] = draw(st.sampled_from(HTTP_METHODS))
        step["body"] = self.json_value(slot.others)
        if draw(st.booleans()):
            step["headers"] = {"X-Run": "{{ run.id }}", "X-Name": self.template_string([])}
        if draw(st.booleans()):
            step["secret"] = {"name": "hook", "source": "ssm"}

    def fill_custom(self, step: dict[str, Any], slot: _Slot) -> None:
        draw = self.draw
        step["url"] = "https://decider.example.com/{{ run.id }}"
        step["payload_config"] = self.json_object(slot.others)
        if slot.next is not None and draw(st.booleans()):
            step["on_success"] = slot.next
        branches: dict[str, str] = {}
        for name in draw(st.lists(st.sampled_from(["fast", "slow", "review"]), unique=True)):
            chained = slot.next if "on_success" not in step and not branches else None
            target = chained or self.extra_target(slot)
            if target is not None:
                branches[name] = target
        if slot.next is not None and "on_success" not in step and not branches:
            branches["next"] = slot.next
        if branches:
            step["branches"] = branches

    def fill_approval(self, step: dict[str, Any], slot: _Slot) -> None:
        draw = self.draw
        step["title"] = f"Approve {self.template_string(slot.others)}"
        choices = st.sampled_from(["approve", "reject", "hold", "ship", "x.$"])
        options = draw(st.one_of(st.none(), st.lists(choices, min_size=1, max_size=5, unique=True)))
        if options is not None:
            step["options"] = options
        options = options or ["approve", "reject"]
        if slot.next is not None:
            if draw(st.booleans()):
                step["branches"] = {draw(st.sampled_from(options)): slot.next}
            else:
                step["on_approve"] = slot.next
        other = self.extra_target(slot)
        if other is not None:
            step["on_reject"] = other
        if draw(st.booleans()):
            names = draw(st.lists(USER_KEYS, max_size=3, unique=True))
            step["form_schema"] = {
                "type": "object",
                "properties": {k: {"type": "string"} for k in names},
            }
        if draw(st.booleans()):
            step["timeout_seconds"] = draw(st.integers(1, 31_536_000))
            action = draw(st.sampled_from(["fail", "approve", "reject", "route"]))
            route = {"approve": "on_approve", "reject": "on_reject"}.get(action)
            if route and not (step.get(route) or action in step.get("branches", {})):
                action = "fail"
            if action == "route":
                target = slot.next or self.extra_target(slot)
                if target is None:
                    action = "fail"
                else:
                    step["on_timeout"] = target
            step["timeout_action"] = action
        if draw(st.booleans()):
            step["assigned_role"] = "finance"

    def maybe_timeout(self, step: dict[str, Any], slot: _Slot) -> None:
        """Perhaps a ``timeout_seconds``, and then perhaps an ``on_timeout`` route (a wait)."""
        draw = self.draw
        if draw(st.booleans()):
            step["timeout_seconds"] = draw(st.integers(1, 31_536_000))
            target = self.extra_target(slot) or slot.next
            if target is not None and draw(st.booleans()):
                step["on_timeout"] = target

    def fill_waitpoint(self, step: dict[str, Any], slot: _Slot) -> None:
        draw = self.draw
        if draw(st.booleans()):
            step["label"] = draw(TEXT)
        if draw(st.booleans()):
            step["idempotency_key"] = self.template_string(slot.others)
        self.maybe_timeout(step, slot)

    def fill_wait_for_event(self, step: dict[str, Any], slot: _Slot) -> None:
        draw = self.draw
        step["event"] = draw(st.sampled_from(["payment.received", "order.shipped", "x" * 256]))
        if draw(st.booleans()):
            step["source"] = draw(st.sampled_from(["billing", "shop.orders"]))
        if draw(st.booleans()):
            step["match"] = draw(st.sampled_from(WAIT_MATCHES))
        self.maybe_timeout(step, slot)

    def fill_agent(self, step: dict[str, Any], slot: _Slot) -> None:
        draw = self.draw
        model = draw(st.sampled_from(AGENT_MODELS))
        step["model"] = model
        if model.startswith("anthropic:") or (model.startswith("openai:") and draw(st.booleans())):
            step["api_key"] = {"name": "relayflow/model-key"}
        step["prompt"] = self.template_string(slot.others)
        if draw(st.booleans()):
            step["system"] = self.template_string([])
        from relayflow.ai.capabilities import sampling

        # A temperature only where the model takes one, in its range (model-capability).
        provider, _, model_id = model.partition(":")
        accepted = sampling(provider, model_id).temperature
        for name, values in (
            ("max_turns", st.integers(1, 50)),
            ("max_tokens", st.integers(1, 100_000)),
            ("token_budget", st.integers(1, 10**7)),
            ("temperature", st.floats(*accepted) if accepted else None),
        ):
            if values is not None and draw(st.integers(0, 2)) == 0:
                step[name] = draw(values)
        tools = draw(st.lists(st.sampled_from(sorted(AWS_TOOLS)), max_size=2, unique=True))
        if draw(st.booleans()):
            name, operation = self.http_tool()
            tools.append(f"http.{name}" + (f".{operation}" if operation else ""))
        if tools:
            step["tools"] = tools
            if draw(st.integers(0, 2)) == 0:
                step["blocked_tools"] = tools[:1]
            elif draw(st.integers(0, 2)) == 0:
                step["require_approval_tools"] = tools[-1:]
                if draw(st.booleans()):
                    step["approval_channels"] = [{"email": {"to": ["ops@example.com"]}}]
        if draw(st.booleans()):
            names = draw(st.lists(USER_KEYS, max_size=3, unique=True))
            step["output_schema"] = draw(
                st.sampled_from(
                    [
                        {"type": "string", "maxLength": 500},
                        {"type": "object", "properties": {k: {"type": "string"} for k in names}},
                    ]
                )
            )
        if slot.next is not None and draw(st.booleans()):
            # Outcomes route instead of on_success: one to the next step (the chain).
            step.pop("on_success", None)
            outcomes = {"done": slot.next}
            other = self.extra_target(slot)
            if draw(st.booleans()):
                outcomes["spam"] = "inherit"
            if other is not None:
                outcomes["more"] = other
            step["outcomes"] = outcomes

    def fill_llm_batch(self, step: dict[str, Any], slot: _Slot) -> None:
        draw = self.draw
        model = draw(st.sampled_from(BATCH_MODELS))
        step["model"] = model
        if model.startswith("anthropic:"):
            step["api_key"] = {"name": "relayflow/model-key"}
        if draw(st.booleans()):
            step["prompt"] = self.template_string(slot.others)
        else:
            step["items"] = draw(st.sampled_from(["{{ trigger.items }}", "{{ trigger.nested }}"]))
            step["prompt_template"] = f"Summarise: {{{{ item }}}} ({{{{ index }}}}) {draw(TEXT)}"
        if draw(st.booleans()):
            step["system"] = self.template_string([])
        if draw(st.booleans()):
            step["poll_interval_seconds"] = draw(st.integers(1, 86_400))
        if draw(st.booleans()):
            step["deadline_seconds"] = draw(st.integers(60, 604_800))
        if draw(st.booleans()):
            step["below_minimum"] = draw(st.sampled_from(["fail", "one_by_one"]))

    def fill_sub_workflow(self, step: dict[str, Any], slot: _Slot) -> None:
        step["workflow_id"] = self.draw(st.sampled_from(["billing", "child-1", "a" * 40]))
        if self.draw(st.booleans()):
            step["version"] = self.draw(st.integers(1, 10**6))
        step["input"] = self.native_input(slot.others)

    # -------------------------------------------------------------- workflow

    def workflow(self) -> dict[str, Any]:
        draw = self.draw
        stress = 0 if self.runnable else draw(st.integers(0, 40))
        if stress == 1:
            # A long chain with a linear retry on every step (compiled size grows per step).
            main = self.scope(0, draw(st.integers(100, 300)), ["transform", "code"])
            for key in main:
                self.steps[key]["retry"] = {"max_attempts": 3, "backoff": "linear"}
        elif stress == 2:
            # One large declared HTTP body, called by several steps.
            body = {"blob": "x" * draw(st.integers(100_000, 300_000)), "id": "{{ args.id }}"}
            self.http_tools["big"] = {
                "base_url": "https://api.example.com",
                "operations": {"send": {"body": body}},
            }
            main = [self.new_key() for _ in range(draw(st.integers(2, 8)))]
            for key, nxt in zip(main, [*main[1:], None], strict=True):
                call: dict[str, Any] = {"type": "tool", "tool": "http.big.send", "args": {}}
                self.steps[key] = call if nxt is None else {**call, "on_success": nxt}
        else:
            main = self.scope(0, draw(st.integers(1, 8)))
        definition: dict[str, Any] = {"id": draw(st.sampled_from(["fuzz", "fuzz-wf", "f" * 64]))}
        if draw(st.booleans()):
            definition["name"] = draw(TEXT)
        definition["start"] = main[0]
        if draw(st.integers(0, 3)) == 0 and any("on_failure" not in self.steps[k] for k in main):
            # A workflow-wide error route: a handler only errors reach.
            handler = self.new_key()
            self.steps[handler] = {"type": "noop"}
            definition["errors"] = {"on_failure": handler}
        definition["steps"] = self.steps
        if not self.runnable:
            self.compensations(definition)
        if self.http_tools:
            definition["http_tools"] = self.http_tools
        if draw(st.booleans()):
            low, high = (60, 120) if self.runnable else (1, 31_536_000)
            definition["run_timeout_seconds"] = draw(st.integers(low, high))
        if draw(st.integers(0, 2)) == 0:
            definition["defaults"] = self.defaults()
        if self.runnable or draw(st.booleans()):
            # Runnable: a cycle that never leaves stops after a few dozen steps.
            definition["max_steps_per_run"] = draw(st.integers(1, 12 if self.runnable else 100_000))
        return definition

    def compensations(self, definition: dict[str, Any]) -> None:
        """``compensate`` on some acting steps of the main flow and on for_each item steps
        (not in a parallel branch nor on a cycle: validation refuses those), in about a
        third of the definitions: inline calls and compensation steps of their own, whose
        templates read ``output``.

        The choices come from a generator seeded by the definition, not from Hypothesis:
        drawing would change the byte stream of every later example, and with it the rare
        edge values (non-finite numbers, long delays) the corpus is checked to keep."""
        import random
        import zlib

        from relayflow.definition.graph import StepGraph

        pick = random.Random(zlib.crc32(repr(sorted(self.steps.items())).encode()))
        if pick.randrange(3):
            return
        handler = (definition.get("errors") or {}).get("on_failure")
        graph = StepGraph(self.steps, definition["start"], handler)
        scopes, _ = graph.scopes()
        on_cycle = {k for scope in scopes for cycle in graph.cycles(scope) for k in cycle}
        main = [k for k in scopes[0].steps if k not in on_cycle]
        items = [self.steps[k]["step"] for k in main if self.steps[k]["type"] == "for_each"]
        acting = ("tool", "webhook_out", "custom", "code", "agent")
        for key in [*main, *items]:
            if self.steps[key]["type"] not in acting or pick.randrange(2):
                continue
            reads = ["{{ output }}", "{{ trigger.name }}", "{{ run.id }}"]
            if key in items:
                reads.append("{{ index }}")
            call: dict[str, Any] = dict(
                pick.choice(
                    [
                        {"type": "webhook_out", "url": "https://undo.example.com/hook"},
                        {"type": "custom", "url": "https://undo.example.com/decide"},
                        {"type": "tool", "tool": "aws.sqs.send_message"},
                    ]
                )
            )
            body = {"undo": pick.choice(reads), "step": f"{{{{ steps.{key}.output }}}}"}
            if call["type"] == "webhook_out":
                call["body"] = body
            elif call["type"] == "tool":
                call["args"] = {"queue_url": "https://sqs.example.com/undo", "body": body}
            if pick.randrange(2):
                call["retry"] = {"max_attempts": pick.randint(1, 5), "backoff": "exponential"}
            if pick.randrange(2):
                self.steps[key]["compensate"] = call
            else:
                target = self.new_key()
                self.steps[target] = call
                self.steps[key]["compensate"] = target

    def defaults(self) -> dict[str, Any]:
        """A ``defaults`` block: any subset of retry (a policy or none), timeout (seconds or
        none) and delay_seconds."""
        draw = self.draw
        block: dict[str, Any] = {}
        if draw(st.booleans()):
            block["retry"] = draw(st.sampled_from(["none", "policy"]))
            if block["retry"] == "policy":
                block["retry"] = self.retry(linear=True)
        if draw(st.booleans()):
            low, high = (10, 30) if self.runnable else (1, 31_536_000)
            block["timeout_seconds"] = draw(st.one_of(st.integers(low, high), st.just("none")))
        if draw(st.booleans()):
            high = 3 if self.runnable else MAX_WAIT_SECONDS
            block["delay_seconds"] = draw(st.one_of(st.integers(0, high), st.just(0)))
        return block


@st.composite
def workflow_definitions(draw: Callable[..., Any], runnable: bool = False) -> dict[str, Any]:
    """A valid workflow definition (plain data). See the module docstring."""
    return _Builder(draw, runnable).workflow()
