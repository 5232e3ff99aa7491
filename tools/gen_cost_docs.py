"""Write the examples' cost tables in README.md and docs/cost.md from one run of the cost bench.

    .venv/bin/python tools/gen_cost_docs.py     # runs bench/cost_bench.py's examples (~15 s)

Each table sits between ``<!-- generated:<name> -->`` and ``<!-- end generated:<name> -->``
markers (``cost-summary`` in README.md, ``cost-examples`` in docs/cost.md); nothing else in
either file is touched. The counts (transitions, Lambda invocations, log events) are the same
on every run, and ``tests/integration/test_cost_figures.py`` checks them against the examples'
executions; the dollars move by a few cents per million runs between runs (the step Lambdas'
and the recording's times are measured locally).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
COST_DOC = ROOT / "docs" / "cost.md"
#: What README's summary says of each example beside its name.
README_NOTES = {
    "order_triage": "a 900 s hold: Express bills the wait",
    "payment_retry": "60 s of settlement polling",
    "order_fulfilment": "an SES email: $0.0001 on both",
    "order_shipping": "`.sync` children keep it Standard",
    "shipping_quote": "order_shipping's child",
}
README_LABELS = {"payment_retry (declined)": "payment_retry, card declined"}
LOG_LINE = "CloudWatch Logs (execution log)"

if TYPE_CHECKING:
    from cost_bench import Measured, RunUsage
    from cost_engines import Compared


def _seconds(ms: float) -> str:
    seconds = ms / 1000
    if seconds >= 10:
        return f"{seconds:.0f} s"
    return f"{seconds:.1f} s" if seconds >= 1 else f"{seconds:.2f} s"


def _saving(value: float) -> str:
    return f"{value:.1f}×"


def _auto(row: Compared) -> str:
    return f"**{row.pick}**" if row.pick == "express" else row.pick


def _log_dollars(row: Compared) -> float:
    express = row.bills["express"]
    return sum(line.dollars for line in express.lines if line.item == LOG_LINE) * 1_000_000


def cost_examples(measured: Measured) -> str:
    """docs/cost.md's table: every example's counts and both engines' bills per 1M runs."""
    lines = [
        "| example | transitions | Lambda invocations | Express duration | log events | auto "
        "| Standard all-in | Express all-in | of which the log | saving | Express floor "
        "| best saving |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    platform = measured.platform
    for usage, row in zip(measured.runs, measured.rows, strict=True):
        standard, express = row.bills["standard"], row.bills["express"]
        duration = _seconds(usage.duration_ms + platform.native_record_ms)
        lines.append(
            f"| {usage.label} | {usage.transitions} | {len(usage.invocations)} | {duration} "
            f"| {usage.log_events} | {_auto(row)} | ${standard.per_million():,.2f} "
            f"| ${express.per_million():,.2f} | ${_log_dollars(row):,.2f} "
            f"| {_saving(row.saving)} | ${row.floor.per_million():,.2f} "
            f"| {_saving(row.best_saving)} |"
        )
    return "\n".join(lines)


def cost_summary(measured: Measured) -> str:
    """README's table: transitions, the engine ``auto`` picks and both bills per run."""
    lines = [
        "| example | transitions | auto | Standard, per run | Express, per run | saving "
        "| best saving (Express floor) |",
        "|---|---|---|---|---|---|---|",
    ]
    for usage, row in zip(measured.runs, measured.rows, strict=True):
        lines.append(
            f"| {_readme_label(usage)} | {usage.transitions} | {row.pick} "
            f"| ${row.bills['standard'].total:.6f} | ${row.bills['express'].total:.6f} "
            f"| {_saving(row.saving)} | {_saving(row.best_saving)} |"
        )
    return "\n".join(lines)


def _readme_label(usage: RunUsage) -> str:
    label = README_LABELS.get(usage.label, usage.label)
    note = README_NOTES.get(usage.label)
    return f"{label} ({note})" if note else label


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with the lines between ``name``'s markers replaced by ``body``."""
    pattern = re.compile(
        rf"(<!-- generated:{re.escape(name)} -->\n).*?(\n<!-- end generated:{re.escape(name)} -->)",
        re.DOTALL,
    )
    if not pattern.search(text):
        raise SystemExit(f"no <!-- generated:{name} --> block to replace")
    return pattern.sub(lambda m: m.group(1) + body + m.group(2), text, count=1)


def main() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import cost_bench

    measured = cost_bench.collect()
    for path, name, body in (
        (README, "cost-summary", cost_summary(measured)),
        (COST_DOC, "cost-examples", cost_examples(measured)),
    ):
        path.write_text(replace_block(path.read_text(), name, body))
        print(f"wrote {name} in {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
