"""Every setting a function's code can read that names an AWS resource is set by the template.

A setting of ``relayflow.settings.Settings`` whose default names a made-up resource (an ARN in
account 123456789012, the local runtime's ``relayflow`` names, stage ``local``) must never be
read from its default on AWS: the function would act on a resource that does not exist or
belongs to no one, and IAM (or the service) refuses at run time. Which settings a function can
read is derived from the code: every ``<x>.<setting>`` attribute read in the modules of its
import graph (``import_graph.py``, lazy imports included) — an over-approximation, so a setting
a reachable module reads is set even if this function's path may not need it.

Before this test, TriggerFunction and WebhookFunction read the schedule group, the scheduler
role and the trigger function (debounce and batch deadlines are one-time schedules) from their
defaults.
"""

from __future__ import annotations

import ast
import json

import pytest
from import_graph import reachable
from sam_template import ROOT, function_env, function_resources, load_template

from relayflow.settings import SAM_LOCAL_PLACEHOLDERS, Settings

TEMPLATE = load_template()
FUNCTIONS = function_resources(TEMPLATE)
GLOBAL_ENV = TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]

#: (function, setting) pairs that stay unset, and why.
UNSET_ON_PURPOSE = {
    # A step function: StateMachineRole's invoke grant names it, so !GetAtt StateMachineRole
    # here would be a circular dependency. It completes waits and never compiles or creates a
    # state machine (the only readers of the role: control.engines, control.machine_config).
    ("waitpoint", "state_machine_role_arn"): "circular; never creates machines",
}


def _made_up(name: str) -> bool:
    """Whether the setting's default names a resource no deployed stack has."""
    default = Settings.model_fields[name].default
    if not isinstance(default, str):
        return False
    return (
        "123456789012" in default
        or default in ("relayflow", "local")
        or (default.startswith("relayflow-") and name != "approval_signing_secret")
    )


#: Unset means "off" locally, but on AWS it must never be off: what a schedule or rule target
#: could not deliver would be dropped without a trace.
REQUIRED_ON_AWS = ("trigger_dead_letter_queue_arn",)
RESOURCE_SETTINGS = sorted(
    name for name in Settings.model_fields if _made_up(name) or name in REQUIRED_ON_AWS
)


def _settings_read(kind: str) -> set[str]:
    folder = ROOT / "functions" / kind
    closure = reachable(folder / "app.py", [folder, ROOT / "shared"])
    read: set[str] = set()
    for path in closure.modules.values():
        if path.is_dir():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in Settings.model_fields:
                read.add(node.attr)
    return read


def test_the_settings_that_name_resources_are_known():
    # The list the test enforces is derived from the defaults, and holds the ones issue 26 named
    assert {
        "stage",
        "table_name",
        "event_bus_name",
        "schedule_group_name",
        "scheduler_role_arn",
        "trigger_function_arn",
        "state_machine_role_arn",
    } <= set(RESOURCE_SETTINGS)


@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
def test_every_resource_setting_a_function_reads_is_set_by_the_template(kind):
    # Given the variables the function gets (Globals, then its own)
    own = (TEMPLATE["Resources"][FUNCTIONS[kind]]["Properties"].get("Environment") or {}).get(
        "Variables"
    ) or {}
    env = {**GLOBAL_ENV, **own}
    # Then every resource-naming setting its code can read has a value from the stack
    missing = sorted(
        name
        for name in _settings_read(kind) & set(RESOURCE_SETTINGS)
        if (kind, name) not in UNSET_ON_PURPOSE and not env.get(f"RELAYFLOW_{name.upper()}")
    )
    assert not missing, f"{FUNCTIONS[kind]} would read these from their defaults: {missing}"


@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
def test_events_env_json_gives_sam_local_every_variable_the_template_declares(kind):
    # Given what `sam local invoke --env-vars events/env.json` overrides for the function
    local = json.loads((ROOT / "events" / "env.json").read_text())[FUNCTIONS[kind]]
    # Then every Relayflow variable the function gets on AWS has its local value (blank for a
    # feature the local runtime leaves off), and nothing else is set
    declared = {k for k in function_env(TEMPLATE, FUNCTIONS[kind]) if k.startswith("RELAYFLOW_")}
    assert set(local) == declared


def test_every_reference_sam_local_cannot_resolve_is_a_known_placeholder():
    # Given every variable whose template value is a !Ref or !GetAtt of a resource
    references: dict[str, str] = {}
    for logical_id in FUNCTIONS.values():
        for name, value in function_env(TEMPLATE, logical_id).items():
            if not (name.startswith("RELAYFLOW_") and isinstance(value, dict)):
                continue
            target = value.get("Ref") or (value.get("Fn::GetAtt") or [None])[0]
            if target in TEMPLATE["Resources"]:
                references[name.removeprefix("RELAYFLOW_").lower()] = target
    # Then the settings treat SAM's stand-in for each (the logical id) as unset
    assert {k: v for k, v in SAM_LOCAL_PLACEHOLDERS.items() if k in references} == references
