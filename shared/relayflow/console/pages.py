"""The console's pages, each one function from API answers to HTML: workflows, runs, a run
(the timeline drawn on the graph, live while it runs), approvals, the DLQ and breakers."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

from relayflow.console.api import ApiFailure, ConsoleApi, segment
from relayflow.console.forms import render_fields
from relayflow.console.graph import render_svg, shown_status, timeline_states
from relayflow.console.html import BASE, as_json, badge, empty, ms, usd, when

#: Run statuses the run page keeps polling for.
LIVE = ("running", "queued", "pending")
RUN_STATUSES = ("queued", "running", "parked", "succeeded", "failed", "timed_out", "aborted")
#: How often a live run page refreshes (htmx polling).
POLL = "1s"


def _q(value: str) -> str:
    return escape(segment(value))


def run_link(run_id: str) -> str:
    return f'<a href="{BASE}/runs/{_q(run_id)}"><code>{escape(run_id[:12])}</code></a>'


def workflow_link(workflow_id: str) -> str:
    return f'<a href="{BASE}/workflows/{_q(workflow_id)}">{escape(workflow_id)}</a>'


def _post(action: str, label: str, *, kind: str = "", fields: str = "", confirm: str = "") -> str:
    extra = f' onsubmit="return confirm({escape(json.dumps(confirm))})"' if confirm else ""
    return (
        f'<form class="inline" method="post" action="{escape(action)}"{extra}>{fields}'
        f'<button class="{kind}">{escape(label)}</button></form>'
    )


def _listing(
    title: str,
    items: list[Mapping[str, Any]],
    when_empty: str,
    headings: Sequence[str],
    row: Callable[[Mapping[str, Any]], str],
) -> str:
    """A list page: ``title``, then a table of one ``row`` per item under ``headings`` (HTML),
    or the ``when_empty`` note (HTML) when there is none."""
    if not items:
        return f"<h1>{title}</h1>" + empty(when_empty)
    head = "".join(f"<th>{heading}</th>" for heading in headings)
    body = "".join(row(item) for item in items)
    return f"<h1>{title}</h1><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# ----------------------------------------------------------------------------- workflows


def workflows_page(api: ConsoleApi) -> str:
    return _listing(
        "Workflows",
        api.pages("/workflows"),
        "No workflows yet. Register one with <code>relayflow deploy FILE</code> or "
        "<code>PUT /workflows/{id}</code>; it shows up here.",
        ("id", "name", "live / latest", "engine", "state", "updated"),
        _workflow_row,
    )


def _workflow_row(w: Mapping[str, Any]) -> str:
    return (
        f"<tr><td>{workflow_link(w['workflow_id'])}</td><td>{escape(w.get('name') or '')}</td>"
        f"<td>{w.get('live_version')} / {w.get('latest_version')}</td>"
        f"<td>{escape(str(w.get('engine') or 'standard'))}</td>"
        f"<td>{'enabled' if w.get('enabled', True) else '<b>disabled</b>'}</td>"
        f"<td>{when(w.get('updated_at'))}</td></tr>"
    )


def workflow_page(
    api: ConsoleApi,
    workflow_id: str,
    *,
    values: Mapping[str, str] | None = None,
    errors: Mapping[str, str] | None = None,
) -> str:
    workflow = api.get(f"/workflows/{segment(workflow_id)}")
    definition = workflow.get("definition") or {}
    live_version = workflow.get("live_version")
    versions = "".join(
        f"<tr><td>{v['version']}{' <b>live</b>' if v['version'] == live_version else ''}</td>"
        f"<td>{when(v.get('created_at'))}</td><td>{escape(str(v.get('engine') or ''))}</td>"
        f"<td><code>{escape(str(v.get('asl_sha256') or '')[:12])}</code></td>"
        f"<td>{escape('; '.join(v.get('warnings') or []))}</td></tr>"
        for v in reversed(workflow.get("versions") or [])
    )
    runs = api.get(f"/workflows/{segment(workflow_id)}/runs", limit=10).get("items") or []
    schema = definition.get("input_schema")
    form = (
        f'<form method="post" action="{BASE}/workflows/{_q(workflow_id)}/run" id="run-form">'
        f"{render_fields(schema, values, errors)}"
        '<label><input type="checkbox" name="dry_run"> dry run (acting steps only record)</label>'
        '<label><input type="checkbox" name="step_through"> step through (pause before each '
        'step)</label><p><button type="submit" id="start-run">Start run</button></p></form>'
    )
    enabled = workflow.get("enabled", True)
    title = escape(workflow.get("name") or workflow_id)
    return (
        f"<h1>{title} <span class='muted'>{escape(workflow_id)}</span></h1>"
        + ("" if enabled else '<div class="flash error">This workflow is disabled.</div>')
        + '<div class="grid"><div><h2>Graph (live version '
        + f"{workflow.get('live_version')})</h2>"
        + legend()
        + f'<div class="graph-wrap">{render_svg(definition, link="#")}</div></div>'
        + f'<div><h2>Run it</h2><div class="card">{form}</div>'
        + "<h2>Recent runs</h2>"
        + (runs_table(runs, show_workflow=False) if runs else empty("No runs yet."))
        + f'<p><a href="{BASE}/runs?workflow={_q(workflow_id)}">all runs</a></p></div></div>'
        + "<h2>Versions</h2><table><thead><tr><th>version</th><th>published</th><th>engine</th>"
        + f"<th>ASL sha256</th><th>warnings</th></tr></thead><tbody>{versions}</tbody></table>"
    )


def legend() -> str:
    swatches = (
        ("succeeded", "succeeded"),
        ("running", "running"),
        ("parked", "parked / waiting"),
        ("failed", "failed"),
        ("caught", "failed, handled"),
        ("reused", "reused (rerun)"),
        ("pending", "not run"),
    )
    return (
        '<p class="legend muted">'
        + "".join(f'<span class="swatch s-{k}">{label}</span>' for k, label in swatches)
        + '<span>— route</span><span style="color:#d64545">- - on_failure</span>'
        + '<span style="color:#805ad5">··· compensate</span><span><b>park</b>: parks on '
        "error</span></p>"
    )


# ----------------------------------------------------------------------------- runs


def runs_table(runs: list[Mapping[str, Any]], *, show_workflow: bool = True) -> str:
    head = "<th>run</th>" + ("<th>workflow</th>" if show_workflow else "")
    rows = []
    for run in runs:
        parked = run.get("parked") or {}
        note = f" at {escape(parked['step'])}" if parked.get("step") else ""
        extra = " ".join(
            label
            for flag, label in (("dry_run", "dry run"), ("step_through", "step-through"))
            if run.get(flag)
        )
        rows.append(
            f'<tr data-run="{escape(run["run_id"])}"><td>{run_link(run["run_id"])}</td>'
            + (f"<td>{workflow_link(run['workflow_id'])}</td>" if show_workflow else "")
            + f"<td>{badge(run.get('status'))}{note}</td>"
            f"<td>{escape(str(run.get('outcome') or '—'))}</td>"
            f"<td>{run.get('version') or '—'}</td><td>{escape(str(run.get('engine') or ''))}</td>"
            f"<td>{ms(run.get('duration_ms'))}</td><td>{usd(run.get('estimated_cost_usd'))}</td>"
            f"<td>{when(run.get('started_at'))}</td>"
            f"<td class='muted'>{escape(extra)}</td></tr>"
        )
    return (
        f"<table class='runs'><thead><tr>{head}<th>status</th><th>outcome</th><th>version</th>"
        "<th>engine</th><th>duration</th><th>cost</th><th>started</th><th></th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def list_runs(
    api: ConsoleApi, *, status: str = "", workflow: str = "", parked: bool = False
) -> list[Any]:
    """Runs across the tenant's workflows (the API lists them per workflow), newest first;
    ``parked`` uses the tenant-wide parked listing."""
    if parked or status == "parked":
        runs = api.pages("/runs", status="parked")
        return [r for r in runs if not workflow or r["workflow_id"] == workflow]
    ids = [workflow] if workflow else [w["workflow_id"] for w in api.pages("/workflows")]
    runs = []
    for workflow_id in ids:
        runs.extend(
            api.get(f"/workflows/{segment(workflow_id)}/runs", status=status or None, limit=50).get(
                "items"
            )
            or []
        )
    runs.sort(key=lambda r: str(r.get("started_at") or ""), reverse=True)
    return runs[:100]


def runs_page(api: ConsoleApi, *, status: str, workflow: str, parked: bool) -> str:
    workflows = [w["workflow_id"] for w in api.pages("/workflows")]
    runs = list_runs(api, status=status, workflow=workflow, parked=parked)
    status_options = "".join(
        f'<option value="{s}"' + (" selected" if s == status else "") + f">{s}</option>"
        for s in RUN_STATUSES
    )
    workflow_options = "".join(
        f'<option value="{escape(w)}"'
        + (" selected" if w == workflow else "")
        + f">{escape(w)}</option>"
        for w in workflows
    )
    filters = (
        f'<form class="filters" method="get" action="{BASE}/runs">'
        f'<div><label for="status">status</label><select id="status" name="status">'
        f'<option value="">any</option>{status_options}</select></div>'
        f'<div><label for="workflow">workflow</label><select id="workflow" name="workflow">'
        f'<option value="">any</option>{workflow_options}</select></div>'
        '<div><label><input type="checkbox" name="parked" value="1"'
        + (" checked" if parked else "")
        + "> parked only</label></div><div><button>Filter</button></div></form>"
    )
    if runs:
        listing = runs_table(runs)
    elif not workflows:
        listing = empty(
            f'No runs yet, and no workflows. <a href="{BASE}/workflows">Workflows</a> lists what '
            "you register; start a run from a workflow's page."
        )
    else:
        listing = empty("No runs match these filters.")
    return f"<h1>Runs</h1>{filters}{listing}"


# ----------------------------------------------------------------------------- one run


def run_page(api: ConsoleApi, run_id: str) -> str:
    return f"<h1>Run <code>{escape(run_id)}</code></h1>" + run_live(api, run_id)


def run_live(api: ConsoleApi, run_id: str) -> str:
    """The part of the run page that changes while the run runs (polled while it is live)."""
    run = api.get(f"/runs/{segment(run_id)}")
    status = str(run.get("status") or "")
    live = status in LIVE
    workflow: dict[str, Any] = {}
    try:
        workflow = api.get(f"/workflows/{segment(run['workflow_id'])}")
    except ApiFailure:
        workflow = {}
    definition = workflow.get("definition") or {}
    states = timeline_states(run)
    if run.get("rerun_from") and definition:
        _mark_reused(states, definition, str(run["rerun_from"]))
    poll = (
        f' hx-get="{BASE}/runs/{_q(run_id)}/live" hx-trigger="every {POLL}" hx-swap="outerHTML"'
        if live
        else ""
    )
    note = ""
    if workflow and workflow.get("live_version") != run.get("version"):
        note = (
            f'<p class="muted">The graph is the live version\'s ({workflow.get("live_version")}); '
            f"this run ran version {run.get('version')}.</p>"
        )
    graph = render_svg(definition, states) if definition else empty("The workflow is gone.")
    return (
        f'<div id="live" data-status="{escape(status)}"{poll}>'
        + summary(run)
        + actions(api, run, definition)
        + '<div class="grid"><div><h2>Timeline on the graph</h2>'
        + legend()
        + f'<div class="graph-wrap">{graph}</div>{note}</div>'
        + f"<div><h2>Input</h2>{as_json(run.get('input'))}"
        + (f"<h2>Output</h2>{as_json(run.get('output'))}" if run.get("output") is not None else "")
        + "</div></div>"
        + steps_table(run)
        + "</div>"
    )


def _mark_reused(states: dict[str, Any], definition: Mapping[str, Any], start: str) -> None:
    """A rerun's graph: the main-flow steps it did not run because it started later, whose
    outputs it took from the earlier run (status ``reused``)."""
    from relayflow.console.graph import StepState
    from relayflow.definition.graph import StepGraph

    steps = definition.get("steps") or {}
    on_failure = (definition.get("errors") or {}).get("on_failure")
    graph = StepGraph(steps, str(definition.get("start") or ""), on_failure)
    after = graph.reachable(start) if start in steps else set()
    for key in main_flow(definition):
        if key not in states and key not in after:
            states[key] = StepState("reused")


def summary(run: Mapping[str, Any]) -> str:
    facts = [
        ("workflow", workflow_link(run["workflow_id"])),
        ("status", f'<span id="run-status">{badge(run.get("status"))}</span>'),
        ("outcome", escape(str(run.get("outcome") or "—"))),
        ("version", escape(str(run.get("version") or "—"))),
        ("engine", escape(str(run.get("engine") or ""))),
        ("duration", ms(run.get("duration_ms"))),
        ("cost", usd(run.get("estimated_cost_usd"))),
        ("started", when(run.get("started_at"))),
        ("ended", when(run.get("ended_at"))),
        ("attempt", escape(str(run.get("attempt") or 1))),
    ]
    if run.get("rerun_of"):
        facts.append(
            ("rerun of", f"{run_link(run['rerun_of'])} from <b>{escape(run['rerun_from'])}</b>")
        )
    modes = [m for m, f in (("dry run", "dry_run"), ("step-through", "step_through")) if run.get(f)]
    if modes:
        facts.append(("mode", escape(", ".join(modes))))
    cells = "".join(f'<div><span class="k">{k}</span>{v}</div>' for k, v in facts)
    error = ""
    if run.get("error") or run.get("cause"):
        where = f" at step <b>{escape(run['failing_step'])}</b>" if run.get("failing_step") else ""
        error = (
            f'<div class="flash error" id="run-error"><b>{escape(str(run.get("error") or ""))}'
            f"</b>{where}<pre>{escape(str(run.get('cause') or ''))}</pre></div>"
        )
    parked = run.get("parked") or {}
    if parked:
        problem = parked.get("error") or {}
        cause = problem.get("Cause") or ""
        index = (problem.get("details") or {}).get("item_index")
        item = f" (item {index})" if isinstance(index, int) else ""
        error += (
            f'<div class="flash info" id="parked">Parked at <b>{escape(parked["step"])}</b>'
            f"{item} since "
            f"{when(parked.get('parked_at'))}: {escape(str(problem.get('Error') or ''))}"
            f"<pre>{escape(str(cause))}</pre></div>"
        )
    return f'<div class="facts">{cells}</div>{error}'


def _pending_approvals(api: ConsoleApi, run_id: str) -> list[Any]:
    return [a for a in api.pages("/approvals", status="pending") if a.get("run_id") == run_id]


def _dlq_entry(api: ConsoleApi, run_id: str) -> Any:
    try:
        return api.get(f"/dlq/{segment(run_id)}")
    except ApiFailure as failure:
        if failure.status == 404:
            return None
        raise


def actions(api: ConsoleApi, run: Mapping[str, Any], definition: Mapping[str, Any]) -> str:
    """The buttons the run's state allows."""
    run_id, status = str(run["run_id"]), str(run.get("status") or "")
    base = f"{BASE}/runs/{segment(run_id)}"
    parts: list[str] = []
    if status in ("running", "queued", "parked"):
        parts.append(_post(f"{base}/cancel", "Cancel run", kind="danger", confirm="Cancel run?"))
    if status == "running" and run.get("step_through"):
        parts.append(_post(f"{base}/continue", "Continue one step"))
        parts.append(
            _post(
                f"{base}/continue",
                "Run to the end",
                kind="secondary",
                fields='<input type="hidden" name="to_end" value="1">',
            )
        )
    if status == "running":
        for approval in _pending_approvals(api, run_id):
            parts.append(approval_buttons(approval, back=base))
    if status == "parked":
        parts.append(resume_form(base, run))
    if status in ("failed", "timed_out"):
        entry = _dlq_entry(api, run_id)
        if entry and entry.get("status") in ("pending", "exhausted"):
            parts.append(
                _post(f"{BASE}/dlq/{segment(run_id)}/retry", "Retry from the DLQ", kind="secondary")
            )
    if status not in ("running", "queued", "parked", "pending") and definition:
        parts.append(rerun_form(base, run, definition))
    if not parts:
        return ""
    return f'<h2>Actions</h2><div class="actions card">{"".join(parts)}</div>'


def approval_buttons(approval: Mapping[str, Any], *, back: str = "") -> str:
    action = f"{BASE}/approvals/{segment(approval['approval_id'])}/respond"
    hidden = f'<input type="hidden" name="back" value="{escape(back)}">' if back else ""
    data = ""
    if approval.get("form_schema"):
        data = (
            '<textarea name="data" rows="2" placeholder="form data (JSON)" '
            'style="max-width:240px"></textarea>'
        )
    buttons = "".join(
        f'<button name="option" value="{escape(o)}" class="{"danger" if o == "reject" else ""}">'
        f"{escape(o.capitalize())}</button>"
        for o in approval.get("options") or []
    )
    return (
        f'<form method="post" action="{escape(action)}" class="approval" '
        f'data-approval="{escape(approval["approval_id"])}"><span><b>'
        f"{escape(approval.get('title') or approval.get('step') or '')}</b> "
        f'<span class="muted">{escape(approval.get("prompt") or "")}</span></span>'
        f"{hidden}{data}{buttons}</form>"
    )


def resume_form(base: str, run: Mapping[str, Any]) -> str:
    step = escape(str((run.get("parked") or {}).get("step") or ""))
    return (
        f'<form method="post" action="{base}/resume" id="resume-form"><span>Resume at '
        f"<b>{step}</b>:</span>"
        '<select name="action" id="resume-action" aria-label="How to resume">'
        '<option value="retry">retry the step</option>'
        '<option value="skip">skip it with this output</option>'
        '<option value="fail">fail it (its failure route)</option></select>'
        '<textarea name="output" id="resume-output" rows="2" aria-label="Output (JSON, for skip)" '
        'placeholder="output (JSON, for skip)"'
        ' style="max-width:220px"></textarea>'
        '<textarea name="context" rows="2" aria-label="Context (JSON object, merged into trigger)" '
        'placeholder="context (JSON object, merged into trigger)"'
        ' style="max-width:220px"></textarea><button id="resume">Resume</button></form>'
    )


def main_flow(definition: Mapping[str, Any]) -> list[str]:
    from relayflow.definition.graph import StepGraph

    steps = definition.get("steps") or {}
    on_failure = (definition.get("errors") or {}).get("on_failure")
    scopes, _ = StepGraph(steps, str(definition.get("start") or ""), on_failure).scopes()
    return list(scopes[0].steps) if scopes else []


def rerun_form(base: str, run: Mapping[str, Any], definition: Mapping[str, Any]) -> str:
    failing = run.get("failing_step")
    options = "".join(
        f'<option value="{escape(k)}"'
        + (" selected" if k == failing else "")
        + f">{escape(k)}</option>"
        for k in main_flow(definition)
    )
    return (
        f'<form method="post" action="{base}/rerun" id="rerun-form"><span>Rerun from</span>'
        '<select name="from_step" id="rerun-step" aria-label="Step to rerun from">'
        f"{options}</select>"
        '<select name="version" id="rerun-version" aria-label="Version to rerun">'
        '<option value="pinned">its version '
        f'({escape(str(run.get("version")))})</option><option value="current">the live version'
        '</option></select><button id="rerun" class="secondary">Rerun</button></form>'
    )


def step_log(entry: Mapping[str, Any]) -> str:
    """The step's log lines: what the timeline recorded of it, one line per event."""
    lines = []
    if entry.get("started_at"):
        lines.append(f"{entry['started_at']}  started (attempts so far: {entry.get('attempts')})")
    if entry.get("error"):
        lines.append(f"error {entry['error']}: {entry.get('cause') or ''}".rstrip(": "))
    if entry.get("dry_run"):
        lines.append(f"dry run: {json.dumps(entry['dry_run'], default=str)}")
    if entry.get("ended_at"):
        lines.append(
            f"{entry['ended_at']}  {entry.get('status')} after {ms(entry.get('duration_ms'))}"
            + (f" on {entry['runner']}" if entry.get("runner") else "")
        )
    elif entry.get("status"):
        lines.append(f"{entry.get('status')}…")
    return f'<pre class="log">{escape(chr(10).join(lines))}</pre>'


def steps_table(run: Mapping[str, Any]) -> str:
    entries = run.get("steps") or []
    if not entries:
        note = escape(str(run.get("timeline_note") or "No step has started yet."))
        return f"<h2>Steps</h2>{empty(note)}"
    rows = []
    for entry in entries:
        key = str(entry.get("key") or "")
        error = ""
        if entry.get("error"):
            error = (
                f'<div class="step-error">{escape(str(entry["error"]))}</div>'
                f"<pre>{escape(str(entry.get('cause') or ''))}</pre>"
            )
        output = (
            f"<details><summary>output</summary>{as_json(entry.get('output'))}</details>"
            if entry.get("output") is not None
            else ""
        )
        rows.append(
            f'<tr id="step-{escape(key)}" data-step="{escape(key)}"><td><b>{escape(key)}</b><br>'
            f'<span class="muted">{escape(str(entry.get("type") or ""))}</span></td>'
            f"<td>{badge(shown_status(entry))}</td><td>{entry.get('attempts')}</td>"
            f"<td>{ms(entry.get('duration_ms'))}</td><td>{error}{output}"
            f"<details><summary>log</summary>{step_log(entry)}</details></td></tr>"
        )
    note = run.get("timeline_note")
    return (
        "<h2>Steps</h2><table class='steps'><thead><tr><th>step</th><th>status</th>"
        "<th>attempts</th><th>duration</th><th>error, output, log</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        + (f'<p class="muted">{escape(str(note))}</p>' if note else "")
    )


# ----------------------------------------------------------------------------- inboxes


def approvals_page(api: ConsoleApi) -> str:
    return _listing(
        "Approvals",
        api.pages("/approvals", status="pending"),
        "No approval is waiting for a decision.",
        ("request", "workflow", "run · step", "expires", "decide"),
        _approval_row,
    )


def _approval_row(a: Mapping[str, Any]) -> str:
    return (
        f"<tr><td>{escape(a.get('title') or '')}<br><span class='muted'>"
        f"{escape(a.get('description') or '')}</span></td><td>{workflow_link(a['workflow_id'])}"
        f"</td><td>{run_link(a['run_id'])} · {escape(a['step'])}</td>"
        f"<td>{when(a.get('expires_at'))}</td><td>{approval_buttons(a)}</td></tr>"
    )


def dlq_page(api: ConsoleApi) -> str:
    return _listing(
        "Dead-letter queue",
        api.pages("/dlq"),
        "No failed run is in the DLQ.",
        ("run", "workflow", "entry", "error", "retries", ""),
        _dlq_row,
    )


def _dlq_row(e: Mapping[str, Any]) -> str:
    run_id = str(e["run_id"])
    buttons = ""
    if e.get("status") in ("pending", "exhausted"):
        buttons = _post(f"{BASE}/dlq/{segment(run_id)}/retry", "Retry") + _post(
            f"{BASE}/dlq/{segment(run_id)}/discard", "Discard", kind="secondary"
        )
    return (
        f"<tr data-run='{escape(run_id)}'><td>{run_link(run_id)}</td>"
        f"<td>{workflow_link(e['workflow_id'])}</td><td>{badge(e.get('status'))}</td>"
        f"<td>{escape(str(e.get('error') or ''))} at "
        f"{escape(str(e.get('failing_step') or '—'))}</td><td>{e.get('attempts')}</td>"
        f"<td>{buttons}</td></tr>"
    )


def breakers_page(api: ConsoleApi) -> str:
    return _listing(
        "Circuit breakers",
        api.pages("/breakers"),
        "No breaker has counted a failure yet: every tool and workflow is closed.",
        ("breaker", "state", "failures", "trips", "reopens", "last error", ""),
        _breaker_row,
    )


def _breaker_row(b: Mapping[str, Any]) -> str:
    breaker_id = str(b["breaker_id"])
    reset = _post(f"{BASE}/breakers/{segment(breaker_id)}/reset", "Reset")
    return (
        f"<tr data-breaker='{escape(breaker_id)}'><td><code>{escape(breaker_id)}</code>"
        f"</td><td>{badge(b.get('state'))}</td><td>{b.get('consecutive_failures')}"
        f" / {b.get('failure_threshold') or '—'}</td><td>{b.get('trips')}</td>"
        f"<td>{when(b.get('reopens_at'))}</td><td>{escape(str(b.get('last_error') or ''))}"
        f"</td><td>{reset}</td></tr>"
    )
