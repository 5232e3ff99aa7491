"""Guest links: HMAC-SHA256 over tenant, approval id, option and expiry."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from relayflow.approvals.links import (
    MAX_LINK_SECONDS,
    ExpiredLink,
    GuestLink,
    InvalidLink,
    guest_links,
    link_expiry,
    sign_link,
    signature,
    to_epoch,
    verify_link,
)

KEY = b"k" * 40
OTHER_KEY = b"o" * 40
NOW = 1_700_000_000
EXPIRES = NOW + 3600
BASE = "https://api.example.com/prod"


def parts(url: str) -> tuple[str, dict[str, str]]:
    split = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(split.query).items()}
    return split.path, query


def signed(**overrides):
    values = {"tenant": "acme", "approval_id": "a" * 32, "option": "approve", "expires_at": EXPIRES}
    values.update(overrides)
    return values, signature(key=KEY, **values)


def test_sign_then_verify_round_trip_through_the_url():
    # Given a link signed for one approval and option
    url = sign_link(
        BASE, tenant="acme", approval_id="f" * 32, option="approve", expires_at=EXPIRES, key=KEY
    )
    path, query = parts(url)
    # Then it has the documented shape
    assert path == "/prod/guest/approvals/" + "f" * 32
    assert set(query) == {"tenant", "option", "expires", "sig"}
    # When its parts are read back and verified, nothing is raised
    link = GuestLink.from_query(path.rsplit("/", 1)[1], query)
    assert (link.tenant, link.option, link.expires_at) == ("acme", "approve", EXPIRES)
    link.verify(KEY, now=NOW)


@pytest.mark.parametrize(
    "field,value",
    [
        ("tenant", "globex"),
        ("approval_id", "b" * 32),
        ("option", "reject"),
        ("expires_at", EXPIRES + 86400),
    ],
)
def test_changing_any_signed_part_invalidates_the_link(field, value):
    values, sig = signed()
    values[field] = value
    with pytest.raises(InvalidLink):
        verify_link(signature=sig, key=KEY, now=NOW, **values)


def test_a_tampered_signature_is_invalid():
    values, sig = signed()
    flipped = ("0" if sig[0] != "0" else "1") + sig[1:]
    with pytest.raises(InvalidLink):
        verify_link(signature=flipped, key=KEY, now=NOW, **values)


def test_another_key_is_invalid():
    values, sig = signed()
    with pytest.raises(InvalidLink):
        verify_link(signature=sig, key=OTHER_KEY, now=NOW, **values)


def test_parts_cannot_be_shifted_between_fields():
    # "ab" + "c" and "a" + "bc" must not sign the same message
    one = signature(tenant="ab", approval_id="c", option="x", expires_at=EXPIRES, key=KEY)
    two = signature(tenant="a", approval_id="bc", option="x", expires_at=EXPIRES, key=KEY)
    assert one != two


def test_an_expired_link_is_expired_not_invalid():
    values, sig = signed()
    verify_link(signature=sig, key=KEY, now=EXPIRES - 1, **values)
    with pytest.raises(ExpiredLink):
        verify_link(signature=sig, key=KEY, now=EXPIRES, **values)


def test_an_altered_expiry_is_invalid_even_when_past():
    values, sig = signed()
    values["expires_at"] = NOW - 10
    with pytest.raises(InvalidLink):
        verify_link(signature=sig, key=KEY, now=NOW, **values)


@pytest.mark.parametrize(
    "query",
    [
        {},
        {"option": "approve", "expires": str(EXPIRES), "sig": "a" * 64},
        {"tenant": "acme", "expires": str(EXPIRES), "sig": "a" * 64},
        {"tenant": "acme", "option": "approve", "sig": "a" * 64},
        {"tenant": "acme", "option": "approve", "expires": str(EXPIRES)},
        {"tenant": "acme", "option": "approve", "expires": "-5", "sig": "a" * 64},
        {"tenant": "acme", "option": "approve", "expires": "1e9", "sig": "a" * 64},
        {"tenant": "acme", "option": "approve", "expires": str(EXPIRES), "sig": "A" * 64},
        {"tenant": "acme", "option": "approve", "expires": str(EXPIRES), "sig": "a" * 63},
        {"tenant": "acme\n", "option": "approve", "expires": str(EXPIRES), "sig": "a" * 64},
        {"tenant": "x" * 129, "option": "approve", "expires": str(EXPIRES), "sig": "a" * 64},
    ],
)
def test_malformed_query_parameters_are_invalid(query):
    with pytest.raises(InvalidLink):
        GuestLink.from_query("a" * 32, query)


def test_a_short_key_is_refused():
    with pytest.raises(ValueError):
        signature(tenant="t", approval_id="i", option="o", expires_at=1, key=b"short")


def test_link_expiry_is_the_deadline_but_at_most_seven_days():
    assert link_expiry(NOW + 60, NOW) == NOW + 60
    assert link_expiry(NOW + 30 * 86400, NOW) == NOW + MAX_LINK_SECONDS
    assert link_expiry(None, NOW) == NOW + MAX_LINK_SECONDS


def test_to_epoch_reads_iso_text_datetimes_and_numbers():
    assert to_epoch("2023-11-14T22:13:20+00:00") == NOW
    assert to_epoch("2023-11-14T22:13:20Z") == NOW
    assert to_epoch("2023-11-14T22:13:20") == NOW
    assert to_epoch(NOW) == NOW
    assert to_epoch(None) is None


def test_guest_links_sign_one_verifiable_link_per_option():
    approval = {
        "approval_id": "c" * 32,
        "tenant": "acme",
        "options": ["approve", "reject", "escalate"],
        "deadline": "2023-11-14T23:13:20+00:00",
    }
    links = guest_links(approval, BASE, KEY, NOW)
    assert list(links) == ["approve", "reject", "escalate"]
    for option, url in links.items():
        path, query = parts(url)
        link = GuestLink.from_query(path.rsplit("/", 1)[1], query)
        assert link.option == option and link.tenant == "acme"
        assert link.expires_at == NOW + 3600  # the deadline
        link.verify(KEY, now=NOW)


def test_deployed_links_start_with_the_url_the_stack_put_in_ssm(monkeypatch):
    # On AWS the approval function cannot name the API (a dependency cycle): the stack writes
    # the API's URL to an SSM parameter, which the function reads by name.
    import secrets as random

    from moto import mock_aws

    from relayflow.adapters.aws import client, reset_clients
    from relayflow.approvals.links import approval_guest_links
    from relayflow.settings import override_settings

    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SSM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    reset_clients()
    base = "https://abc123.execute-api.us-east-1.amazonaws.com/prod"
    parameter = f"/relayflow-platform/{random.token_hex(4)}/public-base-url"
    secret = f"relayflow-internal/{random.token_hex(4)}/approval-signing-key"
    approval = {
        "approval_id": "a" * 32,
        "tenant": "acme",
        "options": ["approve", "reject"],
        "deadline": "2099-01-01T00:00:00.000Z",
    }
    try:
        with mock_aws():
            client("ssm").put_parameter(Name=parameter, Value=base, Type="String")
            client("secretsmanager").create_secret(Name=secret, SecretString="k" * 64)
            with override_settings(
                public_base_url=None,
                public_base_url_parameter=parameter,
                approval_signing_secret=secret,
            ):
                links = approval_guest_links(approval)
    finally:
        reset_clients()
    assert set(links) == {"approve", "reject"}
    assert all(url.startswith(f"{base}/guest/approvals/{'a' * 32}?") for url in links.values())
