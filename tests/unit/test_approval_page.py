"""The guest approval page: rendering (escaped, no script), form → typed JSON, and the
handler's answers for each link and approval state (with an in-memory wait service)."""

from __future__ import annotations

import copy
import re
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from relayflow.api.approval_page import (
    PAGE_HEADERS,
    FormError,
    form_fields,
    form_to_data,
    handle_guest,
    render_request,
)
from relayflow.approvals.links import sign_link
from relayflow.control.errors import Conflict, NotFound, Unprocessable

KEY = b"k" * 40
NOW = 1_700_000_000
APPROVAL_ID = "d" * 32
SCHEMA = {
    "type": "object",
    "properties": {
        "reason": {"type": "string", "title": "Reason"},
        "amount": {"type": "number"},
        "count": {"type": "integer"},
        "urgent": {"type": "boolean"},
        "level": {"enum": ["low", "high", 3]},
    },
    "required": ["reason", "count"],
}


def approval(**overrides: Any) -> dict[str, Any]:
    item = {
        "approval_id": APPROVAL_ID,
        "tenant": "acme",
        "title": "Refund order 42",
        "description": "Customer asks for 120 EUR back.",
        "prompt": "Approve the refund?",
        "options": ["approve", "reject"],
        "form_schema": None,
        "status": "pending",
        "deadline": None,
        "decision": None,
    }
    item.update(overrides)
    return item


class FakeWaits:
    """get_approval / respond with the WaitService's contract, in memory."""

    def __init__(self, *items: dict[str, Any]) -> None:
        self.items = {(i["tenant"], i["approval_id"]): copy.deepcopy(i) for i in items}
        self.responses: list[tuple[Any, ...]] = []
        self.reject_data: str | None = None

    def get_approval(self, tenant: str, approval_id: str) -> dict[str, Any]:
        item = self.items.get((tenant, approval_id))
        if item is None:
            raise NotFound("no such approval")
        return copy.deepcopy(item)

    def respond(self, tenant, approval_id, option, data=None, responder=""):
        item = self.items.get((tenant, approval_id))
        if item is None:
            raise NotFound("no such approval")
        if self.reject_data:
            raise Unprocessable("bad data", [{"path": "data", "message": self.reject_data}])
        if item["status"] != "pending":
            raise Conflict("already decided", {"code": "approval_decided"})
        self.responses.append((tenant, approval_id, option, data, responder))
        item["status"] = "decided"
        item["decision"] = {
            "option": option,
            "approved": option == "approve",
            "data": data,
            "responder": responder,
            "responded_at": "2023-11-14T22:20:00+00:00",
        }
        return copy.deepcopy(item)


def link_query(option="approve", tenant="acme", approval_id=APPROVAL_ID, expires=NOW + 600):
    url = sign_link(
        "http://x",
        tenant=tenant,
        approval_id=approval_id,
        option=option,
        expires_at=expires,
        key=KEY,
    )
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def call(service, method="GET", query=None, approval_id=APPROVAL_ID, form=None, **kwargs):
    body = urlencode(form or {}, doseq=True) if method == "POST" else None
    return handle_guest(
        method,
        approval_id,
        link_query() if query is None else query,
        body=body,
        content_type="application/x-www-form-urlencoded" if method == "POST" else None,
        service=service,
        key=KEY,
        now=NOW,
        **kwargs,
    )


# ----------------------------------------------------------------------------- rendering


def test_every_request_text_is_escaped_and_the_page_has_no_script():
    hostile = approval(
        title="<script>alert(1)</script>",
        description='"><img src=x onerror=alert(2)>',
        prompt="<b>bold</b>",
        form_schema={"properties": {'x"><script>': {"type": "string", "title": "<i>t</i>"}}},
    )
    page = render_request(hostile, "approve")
    assert "<script" not in page and "<img" not in page and "<b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;i&gt;t&lt;/i&gt;" in page


def test_the_page_headers_forbid_scripts_and_foreign_loads():
    csp = PAGE_HEADERS["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "form-action 'self'" in csp
    assert "script-src" not in csp and "unsafe-inline" not in csp
    assert PAGE_HEADERS["Referrer-Policy"] == "no-referrer"
    assert PAGE_HEADERS["Cache-Control"] == "no-store"


def test_the_form_has_one_input_per_schema_property_and_the_option_button():
    page = render_request(approval(form_schema=SCHEMA), "approve")
    assert re.search(
        r'<input type="text" id="field-reason" name="f.reason" value="" required>', page
    )
    assert 'name="f.amount"' in page and 'step="any"' in page
    assert '<input type="number" id="field-count" name="f.count" value="" required>' in page
    assert '<input type="checkbox" id="field-urgent" name="f.urgent" value="true">' in page
    assert '<option value="high">high</option>' in page and '<option value="3">3</option>' in page
    assert (
        '<button type="submit" id="respond" name="option" value="approve">Approve</button>' in page
    )
    assert '<form method="post">' in page  # posts back to the signed URL itself


# ----------------------------------------------------------------------------- form → JSON


def test_form_fields_are_converted_per_schema_type():
    form = {
        "f.reason": ["ok"],
        "f.amount": ["12.5"],
        "f.count": ["3"],
        "f.urgent": ["true"],
        "f.level": ["3"],
        "f.unknown": ["ignored"],
    }
    assert form_to_data(SCHEMA, form) == {
        "reason": "ok",
        "amount": 12.5,
        "count": 3,
        "urgent": True,
        "level": 3,
    }


def test_an_unchecked_box_is_false_and_empty_optional_fields_are_left_out():
    data = form_to_data(SCHEMA, {"f.reason": ["r"], "f.count": ["-2"], "f.amount": [""]})
    assert data == {"reason": "r", "count": -2, "urgent": False}


def test_every_bad_field_is_reported():
    with pytest.raises(FormError) as caught:
        form_to_data(SCHEMA, {"f.amount": ["1,5"], "f.count": ["2.5"], "f.level": ["medium"]})
    assert caught.value.problems == [
        "Reason is required",
        "amount must be a number",
        "count must be a whole number",
        "level: choose one of the listed values",
    ]


def test_no_schema_means_no_data():
    assert form_to_data(None, {"f.x": ["1"]}) is None
    assert form_fields({"type": "object"}) == []


# ----------------------------------------------------------------------------- the handler


def test_get_shows_the_pending_request():
    page = call(FakeWaits(approval()))
    assert page.status == 200
    assert "Refund order 42" in page.body and "Approve the refund?" in page.body


def test_post_answers_with_the_links_option_as_a_guest():
    service = FakeWaits(approval(form_schema=SCHEMA))
    page = call(service, "POST", form={"f.reason": ["fine"], "f.count": ["1"], "option": "reject"})
    assert page.status == 200 and "Approved — the workflow continues" in page.body
    # the option comes from the signed link, never from the form
    assert service.responses == [
        (
            "acme",
            APPROVAL_ID,
            "approve",
            {"reason": "fine", "count": 1, "urgent": False},
            "guest:approve",
        )
    ]


def test_a_second_post_is_already_decided_and_says_by_whom():
    service = FakeWaits(approval())
    assert call(service, "POST", query=link_query("reject")).status == 200
    again = call(service, "POST", query=link_query("approve"))
    assert again.status == 409
    assert "already answered “Reject” by guest:reject at 2023-11-14 22:20 UTC" in again.body
    assert len(service.responses) == 1
    assert call(service).status == 409  # the page itself says so too


def test_invalid_form_data_shows_the_form_again_without_answering():
    service = FakeWaits(approval(form_schema=SCHEMA))
    page = call(service, "POST", form={"f.reason": ["<x>"], "f.count": ["many"]})
    assert page.status == 422
    assert "count must be a whole number" in page.body
    assert 'value="&lt;x&gt;"' in page.body  # the entered value, refilled and escaped
    assert service.responses == []


def test_data_the_service_refuses_is_shown_as_a_problem():
    service = FakeWaits(approval())
    service.reject_data = "amount: 5 is less than the minimum of 10"
    page = call(service, "POST")
    assert page.status == 422 and "less than the minimum of 10" in page.body


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_tampered_signature_is_403_with_a_generic_message(method):
    service = FakeWaits(approval())
    query = link_query()
    query["sig"] = ("0" if query["sig"][0] != "0" else "1") + query["sig"][1:]
    page = call(service, method, query=query)
    assert page.status == 403
    assert "This link is invalid or has expired." in page.body
    assert service.responses == []


def test_an_expired_link_is_410():
    page = call(FakeWaits(approval()), "POST", query=link_query(expires=NOW - 1))
    assert page.status == 410 and "invalid or has expired" in page.body


def test_an_unknown_or_other_tenants_approval_is_404():
    service = FakeWaits(approval(tenant="globex"))
    # a valid link of tenant acme naming globex's approval id
    page = call(service, "POST", query=link_query(tenant="acme"))
    assert page.status == 404 and service.responses == []


def test_a_link_to_an_option_the_approval_does_not_offer_is_403():
    page = call(FakeWaits(approval()), query=link_query("escalate"))
    assert page.status == 403


def test_an_approval_past_its_deadline_is_410():
    service = FakeWaits(approval(expires_at="2023-11-14T22:00:00Z"))  # as ApprovalView
    assert call(service, "POST").status == 410
    assert service.responses == []


def test_an_expired_conflict_from_the_service_is_410():
    class Expiring(FakeWaits):
        def respond(self, *args, **kwargs):
            raise Conflict("expired", {"code": "approval_expired"})

    assert call(Expiring(approval()), "POST").status == 410


def test_a_post_that_is_not_a_form_or_too_large_is_refused():
    service = FakeWaits(approval())
    json_post = handle_guest(
        "POST",
        APPROVAL_ID,
        link_query(),
        body="{}",
        content_type="application/json",
        service=service,
        key=KEY,
        now=NOW,
    )
    assert json_post.status == 415
    big = handle_guest(
        "POST",
        APPROVAL_ID,
        link_query(),
        body="f.x=" + "a" * 70_000,
        content_type="application/x-www-form-urlencoded",
        service=service,
        key=KEY,
        now=NOW,
    )
    assert big.status == 413
    assert service.responses == []
