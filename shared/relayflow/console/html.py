"""The console's page frame, its style sheet and small formatting helpers (plain escaped
HTML: no template engine, nothing that runs in the page but the vendored htmx)."""

from __future__ import annotations

import json
from html import escape
from typing import Any

#: The vendored htmx (npm ``htmx.org``, pinned; 0BSD), served from the package.
HTMX_FILE = "htmx-2.0.11.min.js"
BASE = "/console"

NAV = (
    ("runs", "Runs"),
    ("workflows", "Workflows"),
    ("approvals", "Approvals"),
    ("dlq", "DLQ"),
    ("breakers", "Breakers"),
)

STYLE = """
:root{--fg:#1d2330;--muted:#667085;--line:#d9dee7;--bg:#f6f7f9;--card:#fff;--accent:#3056d3;
--ok:#187a42;--bad:#c53030;--run:#2b6cb0;--wait:#975a16;--idle:#5a6577}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,sans-serif;color:var(--fg);
background:var(--bg)}header{display:flex;gap:18px;align-items:center;padding:10px 20px;
background:#1d2330;color:#fff}header a{color:#cbd5e1;text-decoration:none}header a.on{color:#fff;
font-weight:600}header .brand{font-weight:700;color:#fff;margin-right:12px}header form{margin-left:
auto}main{padding:18px 20px;max-width:1280px}h1{font-size:20px;margin:0 0 12px}h2{font-size:16px;
margin:18px 0 8px}.card{background:var(--card);border:1px solid var(--line);border-radius:8px;
padding:14px;margin-bottom:14px}table{border-collapse:collapse;width:100%;background:var(--card)}
th,td{text-align:left;padding:6px 9px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-size:12px;color:var(--muted);font-weight:600}a{color:var(--accent)}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;color:#fff;
background:var(--idle)}.b-succeeded{background:var(--ok)}.b-failed,.b-timed_out,.b-open{
background:var(--bad)}.b-running,.b-retrying{background:var(--run)}.b-parked,.b-queued,
.b-pending,.b-half_open,.b-waiting{background:var(--wait)}.b-aborted{background:#4a5568}
.b-closed{background:var(--ok)}.muted{color:var(--muted)}.empty{padding:26px;text-align:center;
color:var(--muted);background:var(--card);border:1px dashed var(--line);border-radius:8px}
.flash{padding:10px 12px;border-radius:6px;margin-bottom:12px}.flash.error{background:#fde8e8;
border:1px solid #f5b5b5;color:#9b1c1c}.flash.info{background:#e8f0fe;border:1px solid #b6c8f5}
pre{background:#f1f3f7;padding:8px;border-radius:6px;overflow:auto;max-height:280px;margin:4px 0;
white-space:pre-wrap;overflow-wrap:anywhere;
font-size:12px}button,.button{background:var(--accent);color:#fff;border:0;border-radius:6px;
padding:6px 12px;cursor:pointer;font-size:13px}button.secondary{background:#e2e8f0;color:var(--fg)}
button.danger{background:var(--bad)}form.inline{display:inline}label{display:block;font-weight:600;
margin:8px 0 3px}input[type=text],input[type=number],input[type=password],select,textarea{width:
100%;max-width:520px;padding:6px;border:1px solid var(--line);border-radius:6px;font:inherit}
textarea{font-family:ui-monospace,monospace;font-size:12px}.hint{color:var(--muted);display:block}
.field-error{color:var(--bad);margin:3px 0}.req{color:var(--bad)}.filters{display:flex;gap:10px;
align-items:end;flex-wrap:wrap;margin-bottom:12px}.filters label{margin:0 0 3px}.filters select{
width:auto}.grid{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:14px}
.actions{display:flex;gap:8px;flex-wrap:wrap;align-items:flex-start}.actions form{display:flex;
gap:6px;align-items:center}.actions input,.actions select{width:auto}
.graph-wrap{overflow:auto;background:var(--card);border:1px solid var(--line);border-radius:8px}
svg.graph{font:12px system-ui,sans-serif}.node rect{fill:#fff;stroke:#94a3b8;stroke-width:1.5}
.node .title{font-weight:600;fill:var(--fg)}.node .detail{fill:var(--muted);font-size:11px}
.node.start rect{fill:#e2e8f0}.node.compensation rect{stroke-dasharray:4 3;fill:#faf5ff}
.s-succeeded rect{fill:#e6f6ec;stroke:var(--ok)}.s-failed rect,.s-timed_out rect{fill:#fdeaea;
stroke:var(--bad)}.s-running rect,.s-retrying rect{fill:#e6f0fb;stroke:var(--run);
stroke-width:2.5}.s-parked rect,.s-waiting rect{fill:#fdf4e3;stroke:var(--wait);stroke-width:2.5}
.s-caught rect{fill:#fff4e5;stroke:#dd6b20}.s-reused rect{fill:#eef2f7;stroke:#718096;
stroke-dasharray:5 3}.s-pending rect{fill:#fafbfc;stroke:#cbd5e1}
.edge{fill:none;stroke:#94a3b8;stroke-width:1.4}.e-failure{stroke:var(--bad);stroke-dasharray:5 4}
.e-compensate{stroke:#805ad5;stroke-dasharray:3 3}.e-contains{stroke:#475569;stroke-width:2.4}
.edge-label{font-size:10px;fill:var(--muted)}.edge-label.e-failure{fill:var(--bad)}
.edge-label.e-compensate{fill:#805ad5}.log{font:12px ui-monospace,monospace;white-space:pre-wrap;
margin:0}.step-error{color:var(--bad);font-weight:600}details summary{cursor:pointer}
.legend span{margin-right:10px}.swatch{padding:1px 7px;border-radius:4px;border:1.5px solid
#94a3b8;font-size:12px}.swatch.s-succeeded{background:#e6f6ec;border-color:var(--ok)}
.swatch.s-failed{background:#fdeaea;border-color:var(--bad)}.swatch.s-running{background:#e6f0fb;
border-color:var(--run)}.swatch.s-parked{background:#fdf4e3;border-color:var(--wait)}
.swatch.s-caught{background:#fff4e5;border-color:#dd6b20}.swatch.s-reused{background:#eef2f7;
border-color:#718096;border-style:dashed}.swatch.s-pending{background:#fafbfc;
border-color:#cbd5e1}.facts{display:flex;flex-wrap:wrap;gap:6px 22px;background:var(--card);
border:1px solid var(--line);border-radius:8px;padding:10px 14px;margin-bottom:12px}
.facts .k{display:block;font-size:11px;color:var(--muted);font-weight:600}
"""


def page(
    title: str, body: str, *, active: str = "", flash: str = "", signed_in: bool = True
) -> str:
    """A whole page: the navigation, an optional flash message and ``body``."""
    links = "".join(
        f'<a href="{BASE}/{name}"' + (' class="on"' if name == active else "") + f">{label}</a>"
        for name, label in NAV
    )
    out = (
        f'<form method="post" action="{BASE}/logout"><button class="secondary">Sign out</button>'
        "</form>"
        if signed_in
        else ""
    )
    nav = links if signed_in else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)} · Relayflow console</title><style>{STYLE}</style>"
        f'<script src="{BASE}/static/{HTMX_FILE}"></script></head><body>'
        f'<header><span class="brand">Relayflow</span>{nav}{out}</header>'
        f"<main>{flash}{body}</main></body></html>"
    )


def flash(message: str, kind: str = "error") -> str:
    return f'<div class="flash {kind}" role="alert">{escape(message)}</div>' if message else ""


def badge(status: Any) -> str:
    text = str(status or "—")
    return f'<span class="badge b-{escape(text)}">{escape(text)}</span>'


def ms(value: Any) -> str:
    if value is None:
        return "—"
    value = float(value)
    if value < 1000:
        return f"{value:.0f} ms"
    if value < 120_000:
        return f"{value / 1000:.1f} s"
    return f"{value / 60_000:.1f} min"


def usd(value: Any) -> str:
    return "—" if value is None else f"${float(value):.6f}"


def when(value: Any) -> str:
    """An ISO time shortened for tables (date and time to the second, UTC)."""
    if not value:
        return "—"
    text = str(value).replace("T", " ")
    return escape(text[:19]) + ' <span class="muted">UTC</span>'


def as_json(value: Any) -> str:
    return f"<pre>{escape(json.dumps(value, indent=2, default=str))}</pre>"


def empty(message: str) -> str:
    return f'<div class="empty">{message}</div>'
