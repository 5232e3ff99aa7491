"""The SSRF guard: which URLs check_url refuses, with which rule, and which it lets through.

No test here touches DNS: every host name is answered by the fake resolver below.
"""

from __future__ import annotations

import ipaddress
import socket

import pytest

from relayflow.errors import SsrfBlocked, TransientError
from relayflow.net.ssrf import Target, check_url, redact_url
from relayflow.settings import override_settings

PUBLIC_V4 = "93.184.215.14"
PUBLIC_V6 = "2606:2800:21f:cb07:6820:80da:af6b:8b2c"

DNS: dict[str, list[str]] = {
    "api.example.com": [PUBLIC_V4],
    "dual.example.com": [PUBLIC_V4, PUBLIC_V6],
    "internal.example": ["10.0.0.5"],
    "mixed.example": [PUBLIC_V4, "10.1.2.3"],
    "mixed6.example": [PUBLIC_V6, "fd12:3456::1"],
    "metadata.example": ["169.254.169.254"],
    "loopback6.example": ["::1"],
    "mapped.example": ["::ffff:192.168.0.10"],
    "dev.test": ["127.0.0.1"],
}


def fake_resolver(host: str, port: int) -> list[str]:
    try:
        return DNS[host]
    except KeyError:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None


BLOCKED = [
    # (url, rule word the message must contain)
    ("ftp://api.example.com/file", "scheme"),
    ("file:///etc/passwd", "scheme"),
    ("gopher://api.example.com/", "scheme"),
    ("api.example.com/no-scheme", "scheme"),
    ("http:///path-only", "no host"),
    ("http://:8080/", "no host"),
    ("http://127.0.0.1/", "loopback"),
    ("http://127.0.0.1:8080/admin", "loopback"),
    ("http://127.0.0.1./", "loopback"),
    ("http://user@127.0.0.1/", "loopback"),
    ("http://api.example.com@127.0.0.1/", "loopback"),
    ("http://a@169.254.169.254/latest/meta-data/", "metadata"),
    ("http://2130706433/", "loopback"),
    ("http://0177.0.0.1/", "loopback"),
    ("http://0x7f.0.0.1/", "loopback"),
    ("http://0X7F.1/", "loopback"),
    ("http://127.1/", "loopback"),
    ("http://0/", "unspecified"),
    ("http://0.0.0.0:80/", "unspecified"),
    ("http://0.1.2.3/", "reserved"),
    ("http://[::1]/", "loopback"),
    ("http://[::1]:8443/", "loopback"),
    ("http://[::]/", "unspecified"),
    ("http://[::ffff:127.0.0.1]/", "loopback"),
    ("http://[::ffff:a9fe:a9fe]/", "metadata"),
    ("http://[::127.0.0.1]/", "loopback"),
    ("http://[::8.8.8.8]/", "deprecated"),
    ("http://[64:ff9b::10.0.0.1]/", "private"),
    ("http://[2002:a9fe:a9fe::1]/", "metadata"),
    ("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", "loopback"),  # Teredo, client 127.0.0.1
    ("http://[fd00:ec2::254]/latest/meta-data/", "metadata"),
    ("http://[fe80::1]/", "link-local"),
    ("http://[fe80::1%25eth0]/", "link-local"),
    ("http://[fc00::1]/", "private"),
    ("http://[fd12:3456::1]/", "private"),
    ("http://[ff02::1]/", "multicast"),
    ("http://[2001:db8::1]/", "documentation"),
    ("http://10.0.0.5/", "private"),
    ("http://172.16.0.1/", "private"),
    ("http://172.31.255.255/", "private"),
    ("http://192.168.1.1/", "private"),
    ("http://169.254.169.254/", "metadata"),
    ("http://169.254.170.2/v2/credentials", "link-local"),
    ("http://100.64.0.1/", "CGNAT"),
    ("http://100.127.255.254/", "CGNAT"),
    ("http://198.18.0.1/", "benchmark"),
    ("http://198.19.255.255/", "benchmark"),
    ("http://192.0.2.10/", "documentation"),
    ("http://198.51.100.7/", "documentation"),
    ("http://203.0.113.9/", "documentation"),
    ("http://224.0.0.251/", "multicast"),
    ("http://239.255.255.250/", "multicast"),
    ("http://255.255.255.255/", "broadcast"),
    ("http://240.0.0.1/", "reserved"),
    ("http://192.0.0.192/", "reserved"),
    ("http://localhost/", "loopback"),
    ("http://LOCALHOST.:8000/", "loopback"),
    ("http://app.localhost/", "loopback"),
    ("http://internal.example/", "private"),
    ("http://INTERNAL.EXAMPLE./", "private"),
    ("https://mixed.example/", "private"),
    ("https://mixed6.example/", "private"),
    ("http://metadata.example/", "metadata"),
    ("http://loopback6.example/", "loopback"),
    ("http://mapped.example/", "private"),
    ("http://08.0.0.1/", "not a valid IPv4"),
    ("http://bad_host!.example/", "not a valid host name"),
    ("http://api.example.com:0/", "port 0"),
    ("http://api.example.com:99999/", "invalid URL"),
]


@pytest.mark.parametrize(("url", "rule"), BLOCKED)
def test_blocked_urls_name_the_rule(url, rule):
    # Given a URL that reaches, or may reach, something other than the public internet
    # When the guard checks it
    with pytest.raises(SsrfBlocked) as caught:
        check_url(url, allow=[], resolver=fake_resolver)
    # Then it is refused with a message that names the rule
    assert caught.value.message.startswith("blocked: ")
    assert rule in caught.value.message
    assert caught.value.error_name == "Relayflow.SsrfBlocked"


ALLOWED = [
    ("https://api.example.com/v1/orders?x=1", "api.example.com", 443, (PUBLIC_V4,)),
    ("http://api.example.com:8080/", "api.example.com", 8080, (PUBLIC_V4,)),
    ("HTTPS://API.Example.COM./", "api.example.com", 443, (PUBLIC_V4,)),
    ("https://token@api.example.com/", "api.example.com", 443, (PUBLIC_V4,)),
    ("https://dual.example.com/", "dual.example.com", 443, (PUBLIC_V4, PUBLIC_V6)),
    ("http://8.8.8.8/", "8.8.8.8", 80, ("8.8.8.8",)),
    ("http://134744072/", "134744072", 80, ("8.8.8.8",)),
    (
        "http://[2606:4700:4700::1111]:8443/",
        "2606:4700:4700::1111",
        8443,
        ("2606:4700:4700::1111",),
    ),
    ("http://[::ffff:8.8.8.8]/", "::ffff:8.8.8.8", 80, ("::ffff:8.8.8.8",)),
    ("http://[64:ff9b::8.8.8.8]/", "64:ff9b::8.8.8.8", 80, ("64:ff9b::808:808",)),
    ("http://100.128.0.1/", "100.128.0.1", 80, ("100.128.0.1",)),
    ("http://172.32.0.1/", "172.32.0.1", 80, ("172.32.0.1",)),
]


@pytest.mark.parametrize(("url", "host", "port", "addresses"), ALLOWED)
def test_public_urls_pass_with_their_checked_addresses(url, host, port, addresses):
    # When the guard checks a public URL
    target = check_url(url, allow=[], resolver=fake_resolver)
    # Then it returns where to connect: the normalised host, the port, every resolved address
    assert isinstance(target, Target)
    assert (target.host, target.port) == (host, port)
    assert target.addresses == tuple(ipaddress.ip_address(a) for a in addresses)
    assert target.url == url
    assert target.scheme in ("http", "https")


@pytest.mark.parametrize(
    ("url", "allow"),
    [
        ("http://127.0.0.1:8000/", ["127.0.0.1"]),
        ("http://127.0.0.1:8000/", ["127.0.0.0/8"]),
        ("http://2130706433:8000/", ["127.0.0.1/32"]),
        ("http://[::1]:8000/", ["::1/128"]),
        ("http://dev.test:8000/", ["DEV.TEST."]),
        ("http://dev.test:8000/", ["127.0.0.1"]),
        ("http://localhost:8000/", ["localhost"]),
        ("http://internal.example/", ["10.0.0.0/8"]),
    ],
)
def test_the_allow_list_lets_a_host_or_range_through(url, allow):
    # Given an allow-list entry naming the host or a range holding its address
    # When the guard checks the URL
    target = check_url(url, allow=allow, resolver=lambda h, p: DNS.get(h, ["127.0.0.1"]))
    # Then it passes
    assert target.port in (80, 8000)


def test_the_allow_list_exempts_only_the_addresses_it_names():
    # Given a name whose answer mixes an allowed and another private address
    def resolver(host, port):
        return ["127.0.0.1", "10.0.0.1"]

    # Then the address the allow-list does not cover is still refused
    with pytest.raises(SsrfBlocked, match=r"10\.0\.0\.1 is a private address"):
        check_url("http://two.test/", allow=["127.0.0.1"], resolver=resolver)


def test_the_allow_list_does_not_widen_the_schemes():
    with pytest.raises(SsrfBlocked, match="scheme"):
        check_url("ftp://127.0.0.1/", allow=["127.0.0.1"], resolver=fake_resolver)


def test_the_allow_list_defaults_to_the_settings():
    # Given ssrf_allow set in the settings (local development)
    with override_settings(ssrf_allow=["127.0.0.1"]):
        # When the guard checks a loopback URL without an explicit allow-list
        target = check_url("http://127.0.0.1:9/", resolver=fake_resolver)
    # Then it passes, and without the setting it does not
    assert target.addresses == (ipaddress.ip_address("127.0.0.1"),)
    with override_settings(ssrf_allow=[]), pytest.raises(SsrfBlocked, match="loopback"):
        check_url("http://127.0.0.1:9/", resolver=fake_resolver)


def test_the_refusal_carries_details_and_hides_the_path_and_credentials():
    with pytest.raises(SsrfBlocked) as caught:
        check_url(
            "http://user:pw@internal.example/hooks/T0/B0/secret-token?key=abc",
            allow=[],
            resolver=fake_resolver,
        )
    error = caught.value
    assert error.message == (
        "blocked: 10.0.0.5 is a private address (url http://internal.example/…)"
    )
    assert error.details == {
        "url": "http://internal.example/…",
        "host": "internal.example",
        "address": "10.0.0.5",
        "rule": "private",
    }
    for secret in ("pw", "secret-token", "abc"):
        assert secret not in str(error.to_dict())


def test_an_unresolvable_host_is_a_transient_error():
    with pytest.raises(TransientError, match=r"could not resolve nowhere\.example"):
        check_url("https://nowhere.example/", allow=[], resolver=fake_resolver)


def test_a_resolver_with_no_answer_is_a_transient_error():
    with pytest.raises(TransientError, match="no addresses"):
        check_url("https://empty.example/", allow=[], resolver=lambda h, p: [])


def test_the_resolver_is_asked_for_the_normalised_host_and_port():
    calls = []

    def resolver(host, port):
        calls.append((host, port))
        return [PUBLIC_V4]

    check_url("https://Bücher.Example./x", allow=[], resolver=resolver)
    check_url("http://API.example.com:81/", allow=[], resolver=resolver)
    assert calls == [("xn--bcher-kva.example", 443), ("api.example.com", 81)]


def test_literal_addresses_are_not_resolved():
    def resolver(host, port):
        raise AssertionError("a literal address must not be looked up")

    assert check_url("http://8.8.8.8/", allow=[], resolver=resolver).host == "8.8.8.8"
    with pytest.raises(SsrfBlocked, match="loopback"):
        check_url("http://0x7f000001/", allow=[], resolver=resolver)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:pw@hooks.example.com/services/T0/B0/XYZ?x=1", "https://hooks.example.com/…"),
        ("http://api.example.com", "http://api.example.com/"),
        ("http://api.example.com:80/", "http://api.example.com/"),
        ("https://api.example.com:8443/?q=1", "https://api.example.com:8443/…"),
        ("http://[::1]:8080/", "http://[::1]:8080/"),
        ("http://x:99999/", "(invalid URL)"),
    ],
)
def test_redact_url_keeps_only_the_origin(url, shown):
    assert redact_url(url) == shown


def test_a_loopback_refusal_says_how_to_allow_it_in_development():
    for url in ("http://127.0.0.1:8080/hook", "http://localhost:9000/"):
        with pytest.raises(SsrfBlocked) as refused:
            check_url(url, allow=[])
        message = str(refused.value)
        assert "RELAYFLOW_SSRF_ALLOW='[" in message
        assert "JSON list of host names and CIDR ranges" in message
        assert "never in production" in message
