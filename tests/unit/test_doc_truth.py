"""Figures the docs state, read from the code: the step-type count, the trigger fields, the
default time scales. A change to one of them fails here until the docs say it too."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from relayflow.definition.models import AtTrigger, CronTrigger, EventTrigger, WebhookTrigger
from relayflow.definition.step_models import STEP_TYPES
from relayflow.local.timescale import DEFAULT_TIME_SCALE

ROOT = Path(__file__).resolve().parents[2]
NUMBERS = {15: "fifteen", 16: "sixteen", 17: "seventeen", 18: "eighteen"}


def _text(name: str) -> str:
    return " ".join((ROOT / name).read_text().split())


def test_the_docs_count_the_step_types_the_format_has():
    count = len(STEP_TYPES)
    for name in ("README.md", "docs/definitions.md"):
        text = _text(name)
        stated = {int(n) for n in re.findall(r"\b(\d+) (?:seed )?step types", text)}
        stated |= {
            number
            for number, word in NUMBERS.items()
            if re.search(rf"\b{word} (?:seed )?step types", text, re.IGNORECASE)
        }
        assert stated == {count}, (name, stated)


def _trigger_rows() -> dict[str, set[str]]:
    """Each trigger type's fields as docs/definitions.md's trigger table lists them."""
    rows: dict[str, set[str]] = {}
    current = ""
    for line in (ROOT / "docs" / "definitions.md").read_text().splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) != 5 or not cells[1].startswith("`"):
            continue
        if cells[0]:
            current = cells[0].strip("`")
        if current in ("cron", "at", "event", "webhook"):
            rows.setdefault(current, set()).add(cells[1].strip("`"))
    return rows


@pytest.mark.parametrize(
    ("kind", "model"),
    [
        ("cron", CronTrigger),
        ("at", AtTrigger),
        ("event", EventTrigger),
        ("webhook", WebhookTrigger),
    ],
)
def test_the_trigger_table_lists_every_field_of_each_trigger(kind, model):
    fields = set(model.model_fields) - {"type"}
    assert fields <= _trigger_rows()[kind], sorted(fields - _trigger_rows()[kind])


def _default(module: str, option: str) -> float:
    import importlib

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    adder = {"run": "add_run_command", "serve": "add_serve_command"}[module]
    getattr(importlib.import_module(f"relayflow.cli.{module}"), adder)(sub)
    action = next(
        a for choice in sub.choices.values() for a in choice._actions if option in a.option_strings
    )
    return float(action.default)


def test_local_runtime_md_states_both_default_time_scales():
    text = _text("docs/local-runtime.md")
    assert f"`LocalRuntime`'s default is `{DEFAULT_TIME_SCALE}`" in text
    defaults = {_default(command, "--time-scale") for command in ("run", "serve")}
    assert len(defaults) == 1
    assert f"default to `--time-scale {defaults.pop():g}`" in text


def test_the_resources_file_reference_names_every_key():
    from relayflow.local.resources import LocalResources, TableSpec

    text = (ROOT / "docs" / "local-runtime.md").read_text()
    section = text.split("## The resources file (`--resources`)", 1)[1].split("\n## ", 1)[0]
    keys = set(LocalResources.model_fields) | set(TableSpec.model_fields)
    assert not sorted(k for k in keys if f"`{k}`" not in section)
