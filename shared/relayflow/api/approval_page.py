"""The guest approval page: plain server-rendered HTML behind a signed guest link.

``GET /guest/approvals/{id}?tenant&option&expires&sig`` shows the request (title, description,
prompt), the option the link answers with as a button, and a form built from the approval's
``form_schema``. The form posts (``application/x-www-form-urlencoded``) to the same URL; the
server verifies the link again, turns the fields into typed JSON per the schema and answers
the approval through :class:`relayflow.control.waits.WaitService` as ``guest:<option>``.

Every value is escaped with :func:`html.escape`; the page has no script, loads nothing from
elsewhere and is served with a Content-Security-Policy that allows only its own inline style
(by hash) and forms posting back to this site. ``Referrer-Policy: no-referrer`` and
``Cache-Control: no-store`` keep the signed URL out of other sites' logs and shared caches.

Status codes: 200 the page or a recorded answer, 403 a link that is invalid, 404 an approval
that does not exist (or is another tenant's), 409 already decided, 410 an expired link or
approval, 413 a body over :data:`MAX_FORM_BYTES`, 415 a body that is not a form, 422 form data
that breaks the schema (the form is shown again with the problems).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any
from urllib.parse import parse_qs

from relayflow.approvals.links import (
    ExpiredLink,
    GuestLink,
    LinkError,
    decision_deadline,
    to_epoch,
)
from relayflow.intake import JSON_HOOKS, IntakeError, check_value, loads

#: The largest form body accepted (a form of a few fields is a few hundred bytes).
MAX_FORM_BYTES = 64 * 1024
#: Form inputs are named ``<prefix><property>`` so no schema property can clash with others.
FIELD_PREFIX = "f."

_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem;"
    "color:#1b1f24;line-height:1.5}"
    "h1{font-size:1.5rem}.prompt{font-weight:600}.muted{color:#57606a}"
    "label{display:block;margin:.75rem 0 .25rem;font-weight:600}"
    "input[type=text],input[type=number],select,textarea{width:100%;padding:.4rem;"
    "box-sizing:border-box}"
    ".check label{display:inline;font-weight:600}"
    ".errors{color:#a40e26;border:1px solid #a40e26;padding:.5rem 1rem}"
    "button{margin-top:1.25rem;padding:.6rem 1.5rem;font-size:1rem;cursor:pointer}"
    ".outcome{font-size:1.25rem}"
)
_STYLE_HASH = base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()

#: Headers of every page response.
PAGE_HEADERS: dict[str, str] = {
    "Content-Type": "text/html; charset=utf-8",
    "Content-Security-Policy": (
        f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; form-action 'self'; "
        "base-uri 'none'; frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}

_INTEGER = re.compile(r"^[+-]?[0-9]+\Z")
_NUMBER = re.compile(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?\Z")
_APPROVED_OPTION = "approve"


@dataclass(frozen=True)
class PageResponse:
    """One rendered page and its status."""

    status: int
    body: str
    headers: Mapping[str, str] = field(default_factory=lambda: dict(PAGE_HEADERS))


class FormError(Exception):
    """Form fields that cannot become the schema's JSON; ``problems`` are for the guest."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


# ----------------------------------------------------------------------------- the schema


@dataclass(frozen=True)
class FormField:
    """One top-level property of ``form_schema``, as the page shows and reads it."""

    name: str
    kind: str  # string | number | integer | boolean | enum | json
    label: str
    description: str | None
    required: bool
    choices: tuple[Any, ...] = ()
    default: Any = None


def _kind(spec: Mapping[str, Any]) -> str:
    if isinstance(spec.get("enum"), list) and spec["enum"]:
        return "enum"
    kind = spec.get("type")
    if isinstance(kind, list):  # ["string", "null"]: the first non-null type
        kind = next((k for k in kind if k != "null"), None)
    if kind in ("string", "number", "integer", "boolean"):
        return str(kind)
    return "json"  # objects, arrays, untyped: typed in as JSON


def form_fields(schema: Mapping[str, Any] | None) -> list[FormField]:
    """The fields of an object schema's ``properties``, in order (none without a schema)."""
    if not isinstance(schema, Mapping):
        return []
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    fields = []
    for name, spec in properties.items():
        spec = spec if isinstance(spec, Mapping) else {}
        title = spec.get("title")
        description = spec.get("description")
        fields.append(
            FormField(
                name=str(name),
                kind=_kind(spec),
                label=str(title) if isinstance(title, str) and title else str(name),
                description=str(description) if isinstance(description, str) else None,
                required=name in required,
                choices=tuple(spec.get("enum") or ()),
                default=spec.get("default"),
            )
        )
    return fields


def _choice_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _convert(item: FormField, raw: str) -> Any:
    """One field's text as its JSON value, within the JSON intake policy (relayflow.intake:
    finite numbers DynamoDB can hold, bounded depth); ValueError with a message for the
    guest."""
    value = _converted(item, raw)
    try:
        check_value(value, level=1)  # a field of the form's data object
    except IntakeError as exc:
        raise ValueError(f"{item.label}: {exc.reason}") from None
    return value


def _whole(text: str) -> Any:
    """An integer's text as the API's JSON reader takes it: at most 38 digits (leading zeros,
    which JSON cannot write, aside), else the intake policy's refusal (``number-range``),
    reported by :func:`_convert` as the API reports it. The digits are counted before ``int``
    meets a long text."""
    sign = "-" if text.startswith("-") else ""
    digits = text.lstrip("+-").lstrip("0") or "0"
    return JSON_HOOKS["parse_int"](sign + digits)


def _converted(item: FormField, raw: str) -> Any:
    if item.kind == "integer":
        if not _INTEGER.match(raw.strip()):
            raise ValueError(f"{item.label} must be a whole number")
        return _whole(raw.strip())
    if item.kind == "number":
        text = raw.strip()
        if not _NUMBER.match(text):
            raise ValueError(f"{item.label} must be a number")
        if _INTEGER.match(text):
            return _whole(text)
        number = float(text)
        if not math.isfinite(number):
            raise ValueError(f"{item.label} must be a number")
        return number
    if item.kind == "enum":
        for choice in item.choices:
            if _choice_text(choice) == raw:
                return choice
        raise ValueError(f"{item.label}: choose one of the listed values")
    if item.kind == "json":
        try:
            return loads(raw)
        except IntakeError as exc:
            raise ValueError(f"{item.label}: {exc.message}") from None
        except ValueError:
            raise ValueError(f"{item.label} must be JSON") from None
    return raw


def form_to_data(schema: Mapping[str, Any] | None, form: Mapping[str, Sequence[str]]) -> Any:
    """The decision data from a submitted form: each schema property converted to its type
    (a checkbox is true when sent, false when not); an empty optional field is left out.
    Fields the schema does not name are ignored. :class:`FormError` lists every problem.
    Without a schema (or properties) the data is ``None``."""
    fields = form_fields(schema)
    if not fields:
        return None
    data: dict[str, Any] = {}
    problems: list[str] = []
    for item in fields:
        values = form.get(FIELD_PREFIX + item.name) or []
        raw = values[-1] if values else ""
        if item.kind == "boolean":
            data[item.name] = raw.lower() in ("true", "on", "1", "yes")
            continue
        if raw.strip() == "":
            if item.required:
                problems.append(f"{item.label} is required")
            continue
        try:
            data[item.name] = _convert(item, raw)
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise FormError(problems)
    return data


# ----------------------------------------------------------------------------- rendering


def _get(item: Any, name: str, default: Any = None) -> Any:
    if item is None:
        return default
    value = item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)
    return default if value is None else value


def _when(value: Any) -> str:
    if value is None or value == "":
        return "an unknown time"
    if isinstance(value, datetime.datetime):
        moment = value
    elif isinstance(value, int | float):
        moment = datetime.datetime.fromtimestamp(value, datetime.UTC)
    else:
        try:
            moment = datetime.datetime.fromisoformat(str(value))
        except ValueError:
            return str(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _document(title: str, content: str) -> str:
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body><main>{content}</main></body></html>\n"
    )


def _option_label(option: str) -> str:
    return option.replace("_", " ").capitalize()


def _input(item: FormField, value: str | None) -> str:
    name = escape(FIELD_PREFIX + item.name)
    ident = escape("field-" + item.name)
    required = " required" if item.required else ""
    if item.kind == "boolean":
        checked = " checked" if value in ("true", "on") else ""
        return (
            f'<div class="check"><input type="checkbox" id="{ident}" name="{name}" '
            f'value="true"{checked}> <label for="{ident}">{escape(item.label)}</label></div>'
        )
    label = f'<label for="{ident}">{escape(item.label)}{" *" if item.required else ""}</label>'
    if item.kind == "enum":
        options = [] if item.required else ['<option value=""></option>']
        for choice in item.choices:
            text = _choice_text(choice)
            selected = " selected" if value == text else ""
            options.append(f'<option value="{escape(text)}"{selected}>{escape(text)}</option>')
        control = f'<select id="{ident}" name="{name}"{required}>{"".join(options)}</select>'
    elif item.kind == "json":
        control = (
            f'<textarea id="{ident}" name="{name}" rows="4"{required}>'
            f"{escape(value or '')}</textarea>"
        )
    else:
        kind = "number" if item.kind in ("number", "integer") else "text"
        step = ' step="any"' if item.kind == "number" else ""
        control = (
            f'<input type="{kind}" id="{ident}" name="{name}" value="{escape(value or "")}"'
            f"{step}{required}>"
        )
    hint = f'<div class="muted">{escape(item.description)}</div>' if item.description else ""
    return label + control + hint


def render_request(
    approval: Any,
    option: str,
    *,
    values: Mapping[str, str] | None = None,
    problems: Sequence[str] = (),
) -> str:
    """The page for a pending approval: the request, the form and the link's option as the
    submit button. ``values`` refill the form after ``problems``."""
    title = str(_get(approval, "title", "Approval requested"))
    parts = [f"<h1>{escape(title)}</h1>"]
    description = _get(approval, "description")
    if description:
        parts.append(f'<p class="description">{escape(str(description))}</p>')
    prompt = _get(approval, "prompt")
    if prompt:
        parts.append(f'<p class="prompt">{escape(str(prompt))}</p>')
    deadline = decision_deadline(approval)
    if deadline:
        parts.append(f'<p class="muted">Answer before {escape(_when(deadline))}.</p>')
    if problems:
        items = "".join(f"<li>{escape(p)}</li>" for p in problems)
        parts.append(f'<div class="errors" role="alert"><ul>{items}</ul></div>')
    fields = form_fields(_get(approval, "form_schema"))
    inputs = []
    for item in fields:
        value = (values or {}).get(item.name)
        if value is None and item.default is not None:
            value = _choice_text(item.default)
        inputs.append(_input(item, value))
    # No action: the form posts to this page's own URL, signed query included.
    parts.append(
        '<form method="post">'
        + "".join(inputs)
        + f'<button type="submit" id="respond" name="option" value="{escape(option)}">'
        f"{escape(_option_label(option))}</button></form>"
    )
    return _document(title, "".join(parts))


def render_message(heading: str, text: str, *, title: str | None = None) -> str:
    """A page with one outcome or refusal."""
    return _document(
        title or heading,
        f'<h1>{escape(heading)}</h1><p class="outcome" id="outcome">{escape(text)}</p>',
    )


def render_decided(approval: Any) -> str:
    """ "Already decided by X at T" for an approval that has its answer."""
    decision = _get(approval, "decision") or {}
    option = _get(decision, "option", "an answer")
    responder = _get(decision, "responder", "someone")
    when = _when(_get(decision, "responded_at"))
    return render_message(
        "Already decided",
        f"This request was already answered “{_option_label(str(option))}” by {responder} "
        f"at {when}. Nothing was changed.",
        title=str(_get(approval, "title", "Already decided")),
    )


def render_recorded(approval: Any, option: str) -> str:
    """The outcome of a recorded answer."""
    decision = _get(approval, "decision") or {}
    approved = _get(decision, "approved")
    if approved is None:
        approved = option == _APPROVED_OPTION
    if option == _APPROVED_OPTION or (approved and option not in ("reject",)):
        heading = "Approved"
    elif option == "reject":
        heading = "Rejected"
    else:
        heading = f"Answered “{_option_label(option)}”"
    return render_message(
        heading,
        f"{heading} — the workflow continues. You can close this page.",
        title=str(_get(approval, "title", heading)),
    )


# ----------------------------------------------------------------------------- the handler


def _invalid_link(exc: LinkError) -> PageResponse:
    status = 410 if isinstance(exc, ExpiredLink) else 403
    return PageResponse(status, render_message("Link not usable", exc.public_message))


def _not_found() -> PageResponse:
    return PageResponse(404, render_message("Not found", "This approval request does not exist."))


def _expired() -> PageResponse:
    return PageResponse(
        410,
        render_message(
            "Expired", "This approval request has expired; answers are no longer accepted."
        ),
    )


def _conflict_reason(exc: Exception) -> str:
    """``decided`` or ``expired`` from the control service's Conflict (its stable code)."""
    codes = [getattr(exc, "code", "")]
    details = getattr(exc, "details", None)
    if isinstance(details, Mapping):
        codes.extend(str(details.get(k, "")) for k in ("code", "reason"))
    text = " ".join(str(c) for c in codes).upper()
    return "expired" if "EXPIRED" in text else "decided"


def _status(approval: Any) -> str:
    return str(_get(approval, "status", "pending")).lower()


def _deadline_passed(approval: Any, now: float) -> bool:
    try:
        deadline = to_epoch(decision_deadline(approval))
    except (TypeError, ValueError):
        return False
    return deadline is not None and now >= deadline


def _read_form(body: bytes | str | None, content_type: str | None) -> dict[str, list[str]]:
    raw = body.encode() if isinstance(body, str) else (body or b"")
    if not raw:  # a form without fields
        return {}
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media != "application/x-www-form-urlencoded":
        raise _Refused(415, "Send the form as application/x-www-form-urlencoded.")
    if len(raw) > MAX_FORM_BYTES:
        raise _Refused(413, "The form is too large.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Refused(400, "The form is not readable.") from None
    return parse_qs(text, keep_blank_values=True, max_num_fields=200)


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def handle_guest(
    method: str,
    approval_id: str,
    query: Mapping[str, str | None],
    *,
    body: bytes | str | None = None,
    content_type: str | None = None,
    service: Any = None,
    key: bytes | Callable[[], bytes] | None = None,
    now: float | None = None,
) -> PageResponse:
    """Answer ``GET`` or ``POST /guest/approvals/{approval_id}``. ``service`` is a
    :class:`~relayflow.control.waits.WaitService` (default: the deployment's); ``key`` the
    signing key or a function returning it (default: from Secrets Manager)."""
    from relayflow.control.errors import ApiError, Conflict, NotFound, Unprocessable

    now = time.time() if now is None else now
    try:
        link = GuestLink.from_query(approval_id, query)
        secret = key() if callable(key) else key
        link.verify(secret if secret is not None else _signing_key(), now=now)
    except LinkError as exc:
        from relayflow.observability import logger

        # Which check failed, for operators; never the signature or the key.
        logger.info("guest link refused", extra={"reason": str(exc)[:200], "method": method})
        return _invalid_link(exc)
    service = service if service is not None else _wait_service()
    try:
        approval = service.get_approval(link.tenant, link.approval_id)
    except NotFound:
        return _not_found()
    if _status(approval) == "decided":
        return PageResponse(409, render_decided(approval))
    if _status(approval) == "expired" or _deadline_passed(approval, now):
        return _expired()
    options = [str(o) for o in (_get(approval, "options") or [])]
    if options and link.option not in options:
        return _invalid_link(LinkError("option not offered"))
    if method.upper() == "GET":
        return PageResponse(200, render_request(approval, link.option))
    if method.upper() != "POST":
        return PageResponse(405, render_message("Not allowed", "Open the link in a browser."))

    try:
        form = _read_form(body, content_type)
    except _Refused as exc:
        return PageResponse(exc.status, render_message("Not accepted", exc.message))
    values = {
        name[len(FIELD_PREFIX) :]: items[-1]
        for name, items in form.items()
        if name.startswith(FIELD_PREFIX) and items
    }
    schema = _get(approval, "form_schema")
    try:
        data = form_to_data(schema, form)
    except FormError as exc:
        page = render_request(approval, link.option, values=values, problems=exc.problems)
        return PageResponse(422, page)
    try:
        decided = service.respond(
            link.tenant,
            link.approval_id,
            link.option,
            data=data,
            responder=f"guest:{link.option}",
        )
    except NotFound:
        return _not_found()
    except Conflict as exc:
        if _conflict_reason(exc) == "expired":
            return _expired()
        try:
            approval = service.get_approval(link.tenant, link.approval_id)
        except ApiError:
            return PageResponse(409, render_message("Already decided", exc.message))
        return PageResponse(409, render_decided(approval))
    except Unprocessable as exc:
        problems = [exc.message]
        if isinstance(exc.details, list):
            problems = [str(_get(d, "message", d)) for d in exc.details] or problems
        page = render_request(approval, link.option, values=values, problems=problems)
        return PageResponse(422, page)
    return PageResponse(200, render_recorded(decided, link.option))


def _signing_key() -> bytes:
    from relayflow.approvals.links import signing_key

    return signing_key()


def _wait_service() -> Any:
    from relayflow.control.waits import get_wait_service

    return get_wait_service()
