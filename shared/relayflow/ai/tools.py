"""The tools an agent step may use: gating (enforced here, in code), wire names, and the JSON
Schema of each tool's arguments derived from its declaration.

Which tools an agent may call:

* ``tools`` lists the catalogue tools the agent knows (``aws.*``, ``http.<name>[.<op>]``);
  without it, ``allowed_tools`` is that list;
* with ``allowed_tools``, only the tools in it may run;
* a tool in ``blocked_tools`` never runs.

``workflow.<id>`` names another workflow of the run's tenant as a tool: a call starts a child
run of it (a sub-run, compiled as a ``startExecution.sync:2`` state, see
:mod:`relayflow.compiler.kinds.agent`) whose trigger is the call's arguments.

Only permitted tools are offered to the model. A call to any other name (blocked, not
allowed, or made up) is refused by :meth:`Toolbox.check` before anything runs: the model gets
an error tool-result and the step records the refusal.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from relayflow.ai.messages import ToolSpec
from relayflow.definition.agent_tools import permitted_tools, workflow_tool_id

#: The tool through which an agent with ``output_schema`` or ``outcomes`` gives its answer.
FINAL_ANSWER = "final_answer"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def workflow_argument_schema(declared: Any) -> dict[str, Any]:
    """A workflow tool's argument schema: the child's ``input_schema`` when it declares an
    object one (tool arguments are always an object, so any other declared shape is wrapped
    as ``allOf`` under ``type: object``, which a provider accepts and a mismatch still
    fails), else any object."""
    if not isinstance(declared, Mapping):
        return {"type": "object", "additionalProperties": True}
    schema = {k: v for k, v in declared.items() if k != "$schema"}
    if schema.get("type") == "object":
        return schema
    return {"type": "object", "allOf": [schema]}


def wire_name(tool: str) -> str:
    """A catalogue name as providers accept it (``^[A-Za-z0-9_-]{1,64}$``):
    ``aws.dynamodb.get_item`` → ``aws_dynamodb_get_item``."""
    return _UNSAFE.sub("_", tool)[:64]


def tool_schema(
    tool: str,
    http_tools: Mapping[str, Any],
    workflow_schemas: Mapping[str, Any] | None = None,
) -> tuple[str, dict[str, Any]]:
    """``(description, JSON Schema of the arguments)`` of a catalogue tool.

    AWS tools: the schema of their args model. An HTTP operation: one property per ``args.<x>``
    its templates read (all required). A generic HTTP call: method, path, query, headers,
    body. A workflow: its declared ``input_schema`` (from ``workflow_schemas``, resolved when
    the calling workflow was published), else any object; the arguments become the child
    run's trigger."""
    workflow_id = workflow_tool_id(tool)
    if workflow_id is not None:
        return (
            f"Run the workflow {workflow_id!r} with these arguments as its trigger; the "
            "result is the output of each of its steps.",
            workflow_argument_schema((workflow_schemas or {}).get(workflow_id)),
        )
    if tool.startswith("aws."):
        from relayflow.tools.aws import AWS_TOOLS

        spec = AWS_TOOLS[tool]
        schema = spec.args_model.model_json_schema(by_alias=True)
        schema.pop("title", None)
        return spec.summary, schema
    from relayflow.expressions import expression_paths, template_expressions
    from relayflow.tools.catalogue import split_http_tool
    from relayflow.tools.http import HTTP_METHODS

    name, operation = split_http_tool(tool)
    declaration = http_tools.get(name) or {}
    base = declaration.get("base_url", "")
    if operation is None:
        return f"Call the {name} HTTP API ({base}).", {
            "type": "object",
            "properties": {
                "method": {"type": "string", "enum": list(HTTP_METHODS)},
                "path": {"type": "string", "description": f"Relative to {base}."},
                "query": {"type": "object"},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "body": {},
            },
            "required": ["method", "path"],
        }
    op = (declaration.get("operations") or {}).get(operation) or {}
    names: list[str] = []
    for source in template_expressions(
        {k: op.get(k) for k in ("path", "query", "headers", "body") if op.get(k) is not None}
    ):
        for path in expression_paths(source):
            if len(path) > 1 and path[0] == "args" and path[1] not in names:
                names.append(path[1])
    description = f"{op.get('method', 'POST')} {base}{op.get('path', '/')} ({name}.{operation})."
    return description, {
        "type": "object",
        "properties": {n: {} for n in names},
        "required": names,
    }


@dataclass
class Toolbox:
    """One agent step's tools: what the model is offered and what may run."""

    permitted: list[str]
    known: set[str] = field(default_factory=set)
    blocked: set[str] = field(default_factory=set)
    specs: list[ToolSpec] = field(default_factory=list)
    by_wire: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        config: Mapping[str, Any],
        http_tools: Mapping[str, Any],
        answer_schema: dict[str, Any] | None = None,
    ) -> Toolbox:
        tools, allowed, blocked = (
            config.get("tools"),
            config.get("allowed_tools"),
            config.get("blocked_tools"),
        )
        box = cls(
            permitted=permitted_tools(tools, allowed, blocked),
            known=set(tools or []) | set(allowed or []) | set(blocked or []),
            blocked=set(blocked or []),
        )
        for tool in box.permitted:
            wire = wire_name(tool)
            while wire in box.by_wire or wire == FINAL_ANSWER:
                wire = f"{wire[:60]}_{len(box.by_wire)}"
            box.by_wire[wire] = tool
            description, schema = tool_schema(tool, http_tools, config.get("workflow_schemas"))
            box.specs.append(ToolSpec(wire, description, schema))
        if answer_schema is not None:
            box.specs.append(
                ToolSpec(
                    FINAL_ANSWER,
                    "Give your final answer. Call this exactly once, when you are done.",
                    answer_schema,
                )
            )
        return box

    def resolve(self, called: str) -> str | None:
        """The catalogue tool a model's call names (by wire name or catalogue name)."""
        if called in self.by_wire:
            return self.by_wire[called]
        if called in self.known or called in self.permitted:
            return called
        for tool in sorted(self.known):
            if wire_name(tool) == called:
                return tool
        return None

    def check(self, called: str) -> tuple[str | None, str | None]:
        """``(tool, None)`` when the call may run; ``(tool or None, reason)`` when refused."""
        tool = self.resolve(called)
        if tool is None:
            return None, f"there is no tool named {called!r}"
        if tool in self.blocked:
            return tool, f"tool {tool!r} is blocked for this step"
        if tool not in self.permitted:
            return tool, f"tool {tool!r} is not allowed for this step"
        return tool, None
