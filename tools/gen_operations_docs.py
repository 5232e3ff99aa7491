"""Render the reference tables of docs/operations.md from template.yaml (the source of truth).

    .venv/bin/python tools/gen_operations_docs.py           # rewrite the tables in place
    .venv/bin/python tools/gen_operations_docs.py --check   # exit 1 when they are stale

Each table sits between ``<!-- generated:<name> -->`` and ``<!-- end generated:<name> -->``
markers: the resources the stack holds (with their counts), parameters (with the dev and
prod values of samconfig.toml), outputs, alarms,
functions (with the ``sam local invoke`` line of every sample and how it ends, from
``events/outcomes.json``) and permissions. ``tests/deploy/test_generated_docs.py`` fails when
the document differs from what this renders.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"
DOC = ROOT / "docs" / "operations.md"
SAMCONFIG = ROOT / "samconfig.toml"
OUTCOMES = ROOT / "events" / "outcomes.json"


class _Loader(yaml.SafeLoader):
    """Keeps CloudFormation's short forms (``!Ref X``) as ``{"Ref": X}``-like dicts."""


def _construct(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = suffix if suffix in ("Ref", "Condition") else f"Fn::{suffix}"
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if name == "Fn::GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


_Loader.add_multi_constructor("!", _construct)


def load_template() -> dict[str, Any]:
    return yaml.load(TEMPLATE.read_text(), Loader=_Loader)


# ----------------------------------------------------------------------------- text helpers


def show(value: Any) -> str:
    """A template value as the docs show it: ``${Stage}`` → ``<stage>``, refs by name."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, arg),) = value.items()
        if key == "Ref":
            return {"AWS::NoValue": "-", "Stage": "<stage>"}.get(arg, f"`{arg}`")
        if key == "Fn::Sub":
            text = arg if isinstance(arg, str) else arg[0]
            text = text.replace("${Stage}", "<stage>")
            text = re.sub(
                r"arn:\$\{AWS::Partition\}:(\w+):\$\{AWS::Region\}:\$\{AWS::AccountId\}:",
                r"\1:",
                text,
            )
            text = re.sub(r"arn:\$\{AWS::Partition\}:(\w+):::", r"\1:", text)
            text = re.sub(r"\$\{([A-Za-z]+)\.Arn\}", r"\1", text)
            text = re.sub(r"\$\{([A-Za-z:]+)\}", r"<\1>", text)
            return text
        if key == "Fn::GetAtt":
            return f"{arg[0]}" if arg[1] == "Arn" else f"{arg[0]}.{arg[1]}"
        if key == "Fn::If":
            return f"if {arg[0]}: {show(arg[1])}"
        if key == "Fn::Split":
            return _show_split(arg)
    if isinstance(value, list):
        return ", ".join(show(v) for v in value)
    return str(value)


def _show_split(arg: list[Any]) -> str:
    """``!Split [",", !Join ["", [prefix, !Join [",prefix", !Ref List]]]]`` (one ARN per item
    of a comma-separated parameter) as ``prefix<List item>``; anything else as its parts."""
    separator, joined = arg
    if isinstance(joined, dict) and "Fn::Join" in joined:
        delimiter, parts = joined["Fn::Join"]
        if delimiter == "" and len(parts) == 2 and isinstance(parts[1], dict):
            prefix, inner = parts
            inner_delimiter, listed = inner.get("Fn::Join", [None, None])
            if inner_delimiter == f"{separator}{prefix}" and "Ref" in (listed or {}):
                return f"{show(prefix)}<{listed['Ref']} item>"
    return f"split {show(joined)} at {separator!r}"


def cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def first_sentence(text: str) -> str:
    text = " ".join(str(text or "").split())
    match = re.match(r"(.+?\.)(\s|$)", text)
    return match.group(1) if match else text


def table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def overrides(env: str) -> dict[str, str]:
    config = tomllib.loads(SAMCONFIG.read_text())
    text = (
        config.get(env, {}).get("deploy", {}).get("parameters", {}).get("parameter_overrides", "")
    )
    return dict(re.findall(r'(\w+)="([^"]*)"', text))


# ----------------------------------------------------------------------------- the tables


def parameters(template: dict[str, Any]) -> str:
    dev, prod = overrides("dev"), overrides("prod")
    rows = []
    for name, spec in template["Parameters"].items():
        default = spec.get("Default", "")
        rule = ""
        if "AllowedValues" in spec:
            rule = " / ".join(str(v) for v in spec["AllowedValues"])
        elif "ConstraintDescription" in spec:
            rule = spec["ConstraintDescription"]
        elif "MinValue" in spec:
            rule = f">= {spec['MinValue']}"
        env = f"{dev.get(name, '')} / {prod.get(name, '')}" if name in dev or name in prod else ""
        rows.append(
            [
                f"`{name}`",
                f"`{default}`" if default != "" else "empty",
                env,
                rule,
                first_sentence(spec.get("Description", "")),
            ]
        )
    return table(["parameter", "default", "dev / prod", "allowed", "meaning"], rows)


def outputs(template: dict[str, Any]) -> str:
    rows = []
    for name, spec in template["Outputs"].items():
        export = show(spec["Export"]["Name"]) if "Export" in spec else ""
        rows.append([f"`{name}`", show(spec["Value"]), export, spec.get("Description", "")])
    return table(["output", "value", "export", "meaning"], rows)


def _watches(props: dict[str, Any]) -> str:
    if "MetricName" in props:
        dims = ", ".join(f"{d['Name']}={show(d['Value'])}" for d in props.get("Dimensions", []))
        return f"{props['Namespace']} {props['MetricName']} ({dims}), {props['Statistic']}"
    returned = [m for m in props["Metrics"] if m.get("ReturnData")]
    return "; ".join(str(m.get("Expression") or m.get("Label")) for m in returned)


def alarms(template: dict[str, Any]) -> str:
    rows = []
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::CloudWatch::Alarm":
            continue
        p = resource["Properties"]
        rows.append(
            [
                f"`{show(p['AlarmName'])}`",
                _watches(p),
                f">= {show(p['Threshold'])} in 5 min",
                first_sentence(p.get("AlarmDescription", "")),
            ]
        )
    return f"{len(rows)} alarms, all notifying `AlarmTopic`.\n\n" + table(
        ["alarm", "watches", "fires at", "means"], rows
    )


def _functions(template: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (logical_id, resource["Properties"])
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    ]


def _invoked_by(props: dict[str, Any]) -> str:
    found = []
    for event in (props.get("Events") or {}).values():
        p = event.get("Properties") or {}
        if event["Type"] == "Api":
            found.append(f"API {p['Method'].upper()} {p['Path']}")
        elif event["Type"] == "EventBridgeRule":
            found.append("EventBridge rule (Step Functions status changes)")
        elif event["Type"] == "ScheduleV2":
            found.append(f"Scheduler {p['ScheduleExpression']}")
        elif event["Type"] == "CloudWatchLogs":
            found.append(f"CloudWatch Logs subscription of {show(p['LogGroupName'])}")
    return "; ".join(found)


def _authorizers(template: dict[str, Any]) -> set[str]:
    """Functions an API uses as its authorizer."""
    found = set()
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Api":
            auth = resource["Properties"].get("Auth") or {}
            for authorizer in (auth.get("Authorizers") or {}).values():
                arn = authorizer.get("FunctionArn") or {}
                if "Fn::GetAtt" in arn:
                    found.add(arn["Fn::GetAtt"][0])
    return found


def functions(template: dict[str, Any]) -> str:
    globals_ = template["Globals"]["Function"]
    outcomes = json.loads(OUTCOMES.read_text())
    rows = []
    for logical_id, p in _functions(template):
        kind = Path(p["CodeUri"]).name
        invoked = _invoked_by(p)
        if kind in ("trigger",):
            invoked = "Scheduler schedules and bus rules the control plane creates"
        if logical_id in _authorizers(template):
            invoked = "API Gateway, as the REQUEST authorizer of every non-public route"
        if not invoked:
            invoked = "state machines (lambda:invoke Task)"
        failure = (p.get("EventInvokeConfig") or {}).get("DestinationConfig", {}).get("OnFailure")
        asynchronous = f"on failure → {show(failure['Destination'])}" if failure else ""
        concurrency = p.get("ReservedConcurrentExecutions")
        rows.append(
            [
                f"`{logical_id}`",
                f"`functions/{kind}/`",
                p.get("MemorySize", globals_["MemorySize"]),
                p.get("Timeout", globals_["Timeout"]),
                show(concurrency) if concurrency is not None else "",
                invoked,
                asynchronous,
            ]
        )
    head = table(
        ["function", "code", "MB", "timeout s", "reserved", "invoked by", "asynchronous failures"],
        rows,
    )
    lines = [
        head,
        "",
        "Every sample, as `sam local invoke` runs it and how it ends"
        " (`tests/deploy/test_sam_local_invoke.py` checks each):",
        "",
    ]
    sample_rows = []
    for logical_id, p in _functions(template):
        kind = Path(p["CodeUri"]).name
        for sample in sorted((ROOT / "events" / kind).glob("*.json")):
            outcome = outcomes.get(f"{kind}/{sample.name}", {})
            ends = ", ".join(f"{k} {v}" for k, v in outcome.items())
            sample_rows.append(
                [
                    f"`sam local invoke {logical_id} -e events/{kind}/{sample.name} "
                    "--env-vars events/env.json`",
                    ends,
                ]
            )
    lines.append(table(["command", "ends with"], sample_rows))
    return "\n".join(lines)


def _statement_rows(statement: dict[str, Any]) -> list[str]:
    actions = (
        statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
    )
    resources = (
        statement["Resource"]
        if isinstance(statement["Resource"], list)
        else [statement["Resource"]]
    )
    text = f"{', '.join(a for a in actions)} on {', '.join(show(r) for r in resources)}"
    condition = statement.get("Condition") or {}
    keys = (condition.get("ForAllValues:StringLike") or {}).get("dynamodb:LeadingKeys")
    if keys:
        text += f" (keys {', '.join(keys)})"
    elif condition:
        text += " (" + ", ".join(f"{k} {next(iter(v))}" for k, v in condition.items()) + ")"
    return [text]


def _policy_lines(policies: list[Any]) -> list[str]:
    lines = []
    for policy in policies:
        condition = None
        if isinstance(policy, dict) and "Fn::If" in policy:
            condition, policy = policy["Fn::If"][0], policy["Fn::If"][1]
        prefix = f"if {condition}: " if condition else ""
        if "Statement" in policy:
            for statement in policy["Statement"]:
                lines += [prefix + r for r in _statement_rows(statement)]
        else:
            ((name, args),) = policy.items()
            lines.append(prefix + f"{name} ({', '.join(show(v) for v in args.values())})")
    return lines


def permissions(template: dict[str, Any]) -> str:
    rows = []
    for logical_id, p in _functions(template):
        if "Role" in p:
            role = template["Resources"][p["Role"]["Fn::GetAtt"][0]]["Properties"]
            lines = _policy_lines([pol["PolicyDocument"] for pol in role["Policies"]])
        else:
            lines = _policy_lines(p.get("Policies") or [])
            lines.append("SAM's basic execution and X-Ray write policies")
        failure = (p.get("EventInvokeConfig") or {}).get("DestinationConfig", {}).get("OnFailure")
        if failure:
            lines.append(f"sqs:SendMessage on {show(failure['Destination'])} (SAM, destination)")
        rows.append([f"`{logical_id}`", "<br>".join(cell(x) for x in lines)])
    roles = []
    for logical_id in ("StateMachineRole", "SchedulerRole"):
        role = template["Resources"][logical_id]["Properties"]
        lines = _policy_lines([pol["PolicyDocument"] for pol in role["Policies"]])
        roles.append([f"`{logical_id}`", "<br>".join(cell(x) for x in lines)])
    return table(["function", "may do"], rows) + "\n\n" + table(["role", "may do"], roles)


# ----------------------------------------------------------------------------- what it holds

_NUMBERS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}


def _count(n: int, noun: str) -> str:
    return f"{_NUMBERS.get(n, n)} {noun}{'' if n == 1 else 's'}"


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def _step_functions(template: dict[str, Any]) -> list[str]:
    """The functions the state machines' role may invoke (one per step type that runs code)."""
    role = template["Resources"]["StateMachineRole"]["Properties"]
    found = []
    for policy in role.get("Policies") or []:
        for statement in policy["PolicyDocument"]["Statement"]:
            if statement.get("Sid") != "InvokeStepFunctions":
                continue
            for resource in statement["Resource"]:
                if "Fn::GetAtt" in resource and resource["Fn::GetAtt"][0] not in found:
                    found.append(resource["Fn::GetAtt"][0])
    return found


def _names(kinds: list[str]) -> str:
    return "`relayflow-<stage>-{" + ",".join(kinds) + "}`"


def resources(template: dict[str, Any]) -> str:
    """The stack's resources by role, with the counts the template has now."""
    res = template["Resources"]
    functions = _of_type(template, "AWS::Serverless::Function")
    kind_of = {k: Path(r["Properties"]["CodeUri"]).name for k, r in functions.items()}
    steps = [k for k in _step_functions(template) if k in functions]
    platform = [k for k in functions if k not in steps]
    groups = _of_type(template, "AWS::Logs::LogGroup")
    group_names = [show(r["Properties"]["LogGroupName"]) for r in groups.values()]
    lambda_groups = [n for n in group_names if n.startswith("/aws/lambda/")]
    other_groups = [f"`{n}`" for n in group_names if not n.startswith("/aws/lambda/")]
    queues = [
        show(r["Properties"]["QueueName"]) for r in _of_type(template, "AWS::SQS::Queue").values()
    ]
    dlqs = [q.removeprefix("relayflow-<stage>-").removesuffix("-dlq") for q in queues]
    alarms_ = _of_type(template, "AWS::CloudWatch::Alarm")
    queries = [
        show(r["Properties"]["Name"])
        for r in _of_type(template, "AWS::Logs::QueryDefinition").values()
    ]
    schemas = [
        r["Properties"]["SchemaName"]
        for r in _of_type(template, "AWS::EventSchemas::Schema").values()
    ]
    rows = [
        [
            "`RelayflowLayer`",
            f"`{show(res['RelayflowLayer']['Properties']['LayerName'])}`",
            "the `relayflow` package (without the local runtime and the CLI) and "
            "`shared/requirements.txt`, built for python3.12 arm64 by `shared/Makefile`",
        ],
        [
            _count(len(steps), "step function"),
            _names([kind_of[k] for k in steps]),
            "one per step type that runs code, invoked by the state machines; handler "
            "`app.handler` in `functions/<type>/`",
        ],
        [
            _count(len(platform), "platform function"),
            _names([kind_of[k] for k in platform]),
            "control API, API keys, run recording (and DLQ archive, failure notifications), "
            "per-step events, triggers, webhooks, upkeep every minute "
            "([§13](#13-functions-and-sam-local-invoke) lists what invokes each)",
        ],
        [
            f"{_count(len(groups), 'log group')} ({len(lambda_groups)} of functions)",
            "`/aws/lambda/relayflow-<stage>-<name>`, " + ", ".join(other_groups),
            "retention `LogRetentionDays`",
        ],
        [
            "`RelayflowApi`",
            f"`{show(res['RelayflowApi']['Properties']['Name'])}` (REST, regional)",
            "the control API, webhook ingestion (`/hooks/{slug}`), the guest approval page; "
            "authorizer, throttling, X-Ray, access logs (`ConfigureApiGatewayLogging`)",
        ],
        [
            _count(len(queues), "dead-letter queue"),
            "`relayflow-<stage>-{" + ",".join(dlqs) + "}-dlq`",
            "what an asynchronous hop could not deliver "
            "([Dead-letter queues](#dead-letter-queues))",
        ],
        [
            "`ApprovalSigningSecret`, `PublicBaseUrlParameter`",
            f"`{show(res['ApprovalSigningSecret']['Properties']['Name'])}`, "
            f"`{show(res['PublicBaseUrlParameter']['Properties']['Name'])}`",
            "the key guest approval links are signed with (generated), and the API URL they "
            "start with",
        ],
        [
            "`RelayflowTable`",
            "generated",
            "runs, journal, breakers, leases, approvals: `pk`/`sk`, `GSI1` (`gsi1pk`/`gsi1sk`), "
            "TTL `expires_at`, on demand, PITR, KMS (AWS managed key)",
        ],
        [
            "`PayloadBucket`",
            "generated",
            "step outputs over the offload threshold, under `payloads/`; private, TLS only, "
            "expiring",
        ],
        [
            "`EventBus`",
            f"`{show(res['EventBus']['Properties']['Name'])}`",
            "event triggers and lifecycle events",
        ],
        [
            "`ScheduleGroup`, `SchedulerRole`",
            f"`{show(res['ScheduleGroup']['Properties']['Name'])}`",
            "cron triggers and debounce/batch deadlines (EventBridge Scheduler) and the role they "
            "start runs with",
        ],
        [
            "`BedrockBatchRole`",
            "generated",
            "the role Bedrock batch inference jobs of `llm_batch` run with: `payloads/batch/*` of "
            "the payload bucket only",
        ],
        [
            "`StateMachineRole`, `StateMachineLogGroup`",
            f"generated, `{show(res['StateMachineLogGroup']['Properties']['LogGroupName'])}`",
            "execution role and log destination of every compiled workflow (exported)",
        ],
        [
            "`Dashboard`",
            f"`{show(res['Dashboard']['Properties']['DashboardName'])}`",
            "runs and the latest failed runs, steps, step and platform functions, API Gateway, the "
            "dead-letter queues, every alarm",
        ],
        [
            f"{_count(len(alarms_), 'alarm')}, `AlarmTopic`",
            "`relayflow-<stage>-*`",
            "failed and timed-out runs, run DLQ depth, each dead-letter queue, function errors and "
            "throttles ([the list](#8-alarms-and-what-to-do))",
        ],
        [
            "`EventSchemaRegistry`, " + _count(len(schemas), "schema"),
            f"`{show(res['EventSchemaRegistry']['Properties']['RegistryName'])}`: "
            + ", ".join(f"`{n}`" for n in schemas),
            "the JSON Schemas of the bus events (docs/events/), for EventBridge's schema browser "
            "and code bindings",
        ],
        [
            _count(len(queries), "saved query").replace("querys", "queries"),
            ", ".join(f"`{q}`" for q in queries),
            "Logs Insights ([§7](#7-where-to-look))",
        ],
    ]
    return table(["resource", "name", "purpose"], rows)


SECTIONS = {
    "resources": resources,
    "parameters": parameters,
    "outputs": outputs,
    "alarms": alarms,
    "functions": functions,
    "permissions": permissions,
}


def render(text: str) -> str:
    """``text`` with every generated section replaced by what the template says now."""
    template = load_template()
    for name, build in SECTIONS.items():
        begin, end = f"<!-- generated:{name} -->", f"<!-- end generated:{name} -->"
        pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
        if not pattern.search(text):
            raise SystemExit(f"docs/operations.md has no {begin} … {end} markers")
        replacement = f"{begin}\n{build(template)}\n{end}"
        text = pattern.sub(lambda _match, new=replacement: new, text)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the doc is stale")
    args = parser.parse_args()
    current = DOC.read_text()
    fresh = render(current)
    if args.check:
        if fresh != current:
            print("docs/operations.md is stale: run tools/gen_operations_docs.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
