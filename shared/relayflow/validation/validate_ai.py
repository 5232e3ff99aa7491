"""Validation rules of the AI steps (``agent``, ``llm_batch``): providers, tools, gating,
output schemas and outcomes. Part of :mod:`relayflow.validation.validate`'s one pass."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from relayflow.validation.context import CheckContext


def check_sampling(checker: CheckContext, base: str, raw: Mapping[str, object]) -> None:
    """A sampling parameter the step's model does not take (the capability table of
    :mod:`relayflow.ai.capabilities`) is refused here, with its path, not at run time."""
    from relayflow.ai.capabilities import temperature_problem

    model, temperature = raw.get("model"), raw.get("temperature")
    if not isinstance(model, str) or not isinstance(temperature, int | float):
        return
    provider, _, model_id = model.partition(":")
    problem = temperature_problem(provider, model_id, float(temperature))
    if problem is not None and model_id:
        checker.add(f"{base}.temperature", "model-capability", problem)


def check_provider(
    checker: CheckContext,
    base: str,
    raw: Mapping[str, object],
    label: str,
    providers: Collection[str],
) -> bool:
    """``raw["model"]`` is ``<provider>:<model id>`` with one of ``providers`` and carries what
    that provider needs (anthropic: ``api_key``); whether it does."""
    model = str(raw["model"])
    provider, sep, model_id = model.partition(":")
    if not sep or provider not in providers or not model_id:
        checker.add(
            f"{base}.model",
            "model-provider",
            f"{label} {model!r} must be <provider>:<model id> with provider one of "
            f"{', '.join(providers)}",
        )
        return False
    if provider == "anthropic" and raw.get("api_key") is None:
        checker.add(f"{base}.api_key", "required", "the anthropic provider needs api_key")
        return False
    return True


def check_batches(checker: CheckContext) -> None:
    """llm_batch steps: a provider with a batch API; the per-item prompt's templates."""
    from relayflow.ai.batch import BATCH_PROVIDERS
    from relayflow.ai.bedrock_formats import FAMILIES_TEXT, family_of

    for key, raw in checker.steps.items():
        if raw.get("type") != "llm_batch":
            continue
        base = f"steps.{key}"
        model = raw.get("model")
        if model is None:
            checker.add(f"{base}.model", "required", "an llm_batch needs a model")
        elif isinstance(model, str) and check_provider(
            checker, base, raw, "llm_batch model", BATCH_PROVIDERS
        ):
            provider, _, model_id = model.partition(":")
            if provider == "bedrock" and family_of(model_id) is None:
                checker.add(
                    f"{base}.model",
                    "model-provider",
                    f"Bedrock batch inference records are written for {FAMILIES_TEXT}; "
                    f"{model_id!r} is none of them",
                )
        check_sampling(checker, base, raw)
        for name in ("items", "prompt_template"):
            if raw.get(name) is not None:  # prompt_template also reads item and index
                checker.check_template_field(f"{base}.{name}", raw[name])


def check_agents(checker: CheckContext) -> None:
    """Agent steps: a known provider, tools that exist, consistent gating, a valid
    output schema, outcomes to route."""
    from relayflow.ai.providers import PROVIDERS
    from relayflow.definition.agent_tools import (
        WORKFLOW_TOOL_PREFIX,
        valid_workflow_tool,
        workflow_tools,
    )
    from relayflow.tools.catalogue import check_tool

    # A for_each whose ``step`` is not a key (an inline mapping, a list) is reported by the
    # model's own rule; it names no agent step here.
    per_item = {
        raw["step"]: key
        for key, raw in checker.steps.items()
        if raw.get("type") == "for_each" and isinstance(raw.get("step"), str)
    }

    http_tools = checker.data.get("http_tools")
    http_tools = http_tools if isinstance(http_tools, Mapping) else {}
    for key, raw in checker.steps.items():
        if raw.get("type") != "agent":
            continue
        base = f"steps.{key}"
        if raw.get("agent_id") is not None:
            # The seed engine's reference to a stored agent: Relayflow has no agent store, and
            # running the step without the agent it names would silently change what it does.
            checker.add(
                f"{base}.agent_id",
                "not-applicable",
                "agent_id (a stored agent) is not supported: define the agent in the step "
                "with model, prompt, system and tools",
            )
        model = raw.get("model")
        if model is None:
            checker.add(
                f"{base}.model",
                "required",
                "an agent needs a model, e.g. bedrock:anthropic.claude-3-5-haiku-20241022-v1:0 "
                "or scripted:<fixture>",
            )
        elif isinstance(model, str):
            provider, sep, _ = model.partition(":")
            check_provider(checker, base, raw, "model", PROVIDERS)
            if (
                sep
                and provider in ("bedrock", "scripted")
                and (raw.get("base_url") or raw.get("api_key"))
            ):
                checker.add(
                    f"{base}.base_url" if raw.get("base_url") else f"{base}.api_key",
                    "not-applicable",
                    f"base_url and api_key are for the anthropic and openai providers, "
                    f"not {provider}",
                )
        check_sampling(checker, base, raw)
        lists: dict[str, list[str]] = {}
        for field in ("tools", "allowed_tools", "blocked_tools", "require_approval_tools"):
            names = raw.get(field)
            if not isinstance(names, list):
                continue
            lists[field] = [n for n in names if isinstance(n, str)]
            for i, name in enumerate(names):
                if not isinstance(name, str):
                    continue
                if name.startswith(WORKFLOW_TOOL_PREFIX):
                    if not valid_workflow_tool(name):
                        checker.add(
                            f"{base}.{field}[{i}]",
                            "unknown-tool",
                            f"{name!r} is not workflow.<workflow id> (a-z, 0-9, '_' and '-', "
                            "starting with a letter or digit)",
                        )
                    continue
                for _suffix, rule, message in check_tool(name, {}, http_tools):
                    if rule == "unknown-tool":
                        checker.add(f"{base}.{field}[{i}]", rule, message)
        for name in sorted(
            set(lists.get("allowed_tools", [])) & set(lists.get("blocked_tools", []))
        ):
            checker.add(
                f"{base}.blocked_tools",
                "tool-gating",
                f"tool {name!r} is both allowed and blocked",
            )
        if raw.get("require_approval_tools"):
            from relayflow.definition.agent_tools import permitted_tools

            permitted = set(
                permitted_tools(
                    lists.get("tools") if "tools" in lists else None,
                    lists.get("allowed_tools") if "allowed_tools" in lists else None,
                    lists.get("blocked_tools"),
                )
            )
            for name in lists.get("require_approval_tools", []):
                if name not in permitted:
                    checker.add(
                        f"{base}.require_approval_tools",
                        "tool-gating",
                        f"approval tool {name!r} is not one the agent may call "
                        f"(permitted: {', '.join(sorted(permitted)) or 'none'})",
                    )
        if key in per_item and workflow_tools(lists):
            # Its child runs are compiled states around the agent Task, which a Map item
            # (one unit of work) does not have.
            checker.add(
                f"{base}.tools",
                "for-each-target",
                f"'{key}' runs per item of for_each '{per_item[key]}' and cannot run workflow "
                "tools; run the agent in a sub_workflow per item instead",
            )
        checker.check_json_schema(f"{base}.output_schema", raw.get("output_schema"))
        outcomes = raw.get("outcomes")
        if isinstance(outcomes, Mapping) and not outcomes:
            checker.add(f"{base}.outcomes", "outcomes", "outcomes needs at least one name")
