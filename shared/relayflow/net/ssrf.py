"""The SSRF guard: the one check every outbound URL passes before Relayflow connects to it.

:func:`check_url` parses the URL, resolves its host once and refuses it unless every address
is publicly routable (or on the ``ssrf_allow`` list of local development). It returns the
checked addresses; :mod:`relayflow.net.http` connects to exactly those, so a DNS answer that
changes between the check and the connection (DNS rebinding) cannot redirect the request.

The module uses only the standard library (``idna`` is imported for non-ASCII hosts only), so
importing it costs nothing at cold start.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import unquote, urlsplit

from relayflow.errors import SsrfBlocked, TransientError
from relayflow.settings import get_settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], list[str]]

ALLOWED_SCHEMES: tuple[str, ...] = ("http", "https")
DEFAULT_PORTS: dict[str, int] = {"http": 80, "https": 443}

# Each blocked range, most specific first, with the rule id (in ``details``) and the phrase the
# message uses. Python's ``is_global``/``is_private`` are the fallback only: they miss ranges
# (3.11 counts 100.64/10 as neither private nor global, and IPv4-compatible ::/96 as global).
_RULES: tuple[tuple[str, str, str], ...] = (
    # IPv4
    ("0.0.0.0/32", "unspecified", "an unspecified address"),
    ("0.0.0.0/8", "reserved", "a reserved address (0.0.0.0/8, this network)"),
    ("10.0.0.0/8", "private", "a private address"),
    ("100.64.0.0/10", "cgnat", "a shared address (CGNAT 100.64.0.0/10)"),
    ("127.0.0.0/8", "loopback", "a loopback address"),
    ("169.254.169.254/32", "metadata", "the cloud metadata address (link-local)"),
    ("169.254.0.0/16", "link-local", "a link-local address"),
    ("172.16.0.0/12", "private", "a private address"),
    ("192.0.0.0/24", "reserved", "a reserved address (IETF protocol assignments)"),
    ("192.0.2.0/24", "documentation", "a documentation address"),
    ("192.88.99.0/24", "reserved", "a reserved address (6to4 relay anycast)"),
    ("192.168.0.0/16", "private", "a private address"),
    ("198.18.0.0/15", "benchmark", "a benchmarking address"),
    ("198.51.100.0/24", "documentation", "a documentation address"),
    ("203.0.113.0/24", "documentation", "a documentation address"),
    ("224.0.0.0/4", "multicast", "a multicast address"),
    ("255.255.255.255/32", "broadcast", "the broadcast address"),
    ("240.0.0.0/4", "reserved", "a reserved address (240.0.0.0/4)"),
    # IPv6
    ("::/128", "unspecified", "an unspecified address"),
    ("::1/128", "loopback", "a loopback address"),
    ("fd00:ec2::254/128", "metadata", "the cloud metadata address (link-local)"),
    ("64:ff9b:1::/48", "reserved", "a reserved address (local-use NAT64)"),
    ("100::/64", "reserved", "a reserved address (discard-only)"),
    ("2001:2::/48", "benchmark", "a benchmarking address"),
    ("2001:db8::/32", "documentation", "a documentation address"),
    ("3fff::/20", "documentation", "a documentation address"),
    ("5f00::/16", "reserved", "a reserved address (SRv6 SIDs)"),
    ("fe80::/10", "link-local", "a link-local address"),
    ("fec0::/10", "private", "a private address (site-local)"),
    ("fc00::/7", "private", "a private address (unique local)"),
    ("ff00::/8", "multicast", "a multicast address"),
)
_BLOCKED: tuple[tuple[IPNetwork, str, str], ...] = tuple(
    (ipaddress.ip_network(cidr), rule, phrase) for cidr, rule, phrase in _RULES
)

# IPv6 ranges that carry an IPv4 address in their low 32 bits (6to4 and Teredo are unwrapped
# by ``ipaddress`` itself). Mapped addresses *are* the IPv4 address; the others are judged by
# the embedded address first and then as IPv6.
_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
_LOW32_EMBEDDING: tuple[tuple[IPNetwork, str], ...] = (
    (ipaddress.ip_network("64:ff9b::/96"), "a NAT64 address"),
    (ipaddress.ip_network("::ffff:0:0:0/96"), "an IPv4-translated address"),
    (ipaddress.ip_network("::/96"), "an IPv4-compatible address"),
)
# Deprecated embeddings with no legitimate outbound use: refused even around a public IPv4.
_DEPRECATED_EMBEDDING = (
    ipaddress.ip_network("::ffff:0:0:0/96"),
    ipaddress.ip_network("::/96"),
)

# Numeric host spellings that inet_aton accepts: 1 to 4 parts, each decimal, octal or hex.
_NUMERIC_PART = r"(?:0x[0-9a-f]*|[0-9]+)"
_NUMERIC_HOST = re.compile(rf"{_NUMERIC_PART}(?:\.{_NUMERIC_PART}){{0,3}}")
_HOST_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")


@dataclass(frozen=True)
class Target:
    """A URL the guard accepted: where to connect, and the only addresses to connect to."""

    url: str
    scheme: str
    #: Lower-case ASCII (IDNA) host without a trailing dot or IPv6 brackets, as written.
    host: str
    port: int
    #: Every address the host resolved to, each checked; connect to these and nothing else.
    addresses: tuple[IPAddress, ...]


def check_url(
    url: str,
    *,
    allow: Sequence[str] | None = None,
    resolver: Resolver | None = None,
) -> Target:
    """Check that ``url`` may be fetched and return the addresses to connect to.

    Only ``http``/``https`` URLs with a host pass. The host is resolved once (``resolver``,
    by default :func:`socket.getaddrinfo`, all families) and every address must be publicly
    routable: loopback, private, link-local, metadata, CGNAT, benchmark, documentation,
    multicast, broadcast and reserved ranges are refused, including IPv4 addresses embedded in
    IPv6 and numeric spellings such as ``2130706433`` or ``0x7f.1``. ``allow`` (by default
    ``get_settings().ssrf_allow``) lists host names and CIDRs exempt from the address rules.

    Raises :class:`~relayflow.errors.SsrfBlocked` naming the rule that refused the URL, or
    :class:`~relayflow.errors.TransientError` when the host cannot be resolved.
    """
    shown = redact_url(url)
    try:
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        netloc_host = parts.hostname
        explicit_port = parts.port
    except ValueError as exc:
        raise SsrfBlocked(
            f"blocked: invalid URL ({exc}) (url {shown})", url=shown, rule="invalid-url"
        ) from exc
    if scheme not in ALLOWED_SCHEMES:
        raise SsrfBlocked(
            f"blocked: scheme {scheme or '(none)'!r} is not allowed, only http and https "
            f"(url {shown})",
            url=shown,
            rule="scheme",
        )
    if not netloc_host:
        raise SsrfBlocked(f"blocked: the URL has no host (url {shown})", url=shown, rule="host")
    if explicit_port == 0:
        raise SsrfBlocked(f"blocked: port 0 is not allowed (url {shown})", url=shown, rule="port")
    port = explicit_port or DEFAULT_PORTS[scheme]
    host = normalise_host(netloc_host)

    literal = _literal_address(host, shown)
    exemptions = _parse_allow(tuple(get_settings().ssrf_allow if allow is None else allow))
    host_allowed = host in exemptions.hosts
    if literal is not None:
        addresses: tuple[IPAddress, ...] = (literal,)
    else:
        _check_host_name(host, shown)
        if not host_allowed and (host == "localhost" or host.endswith(".localhost")):
            raise SsrfBlocked(
                f"blocked: {host} is a loopback name (url {shown}){allow_hint(host)}",
                url=shown,
                host=host,
                rule="loopback",
            )
        addresses = _resolve(host, port, resolver or _getaddrinfo, shown)

    for address in addresses:
        if host_allowed or any(
            address.version == network.version and address in network
            for network in exemptions.networks
        ):
            continue
        refusal = blocked_reason(address)
        if refusal is not None:
            rule, phrase = refusal
            hint = allow_hint(str(address)) if rule in _LOCAL_RULES else ""
            raise SsrfBlocked(
                f"blocked: {address} is {phrase} (url {shown}){hint}",
                url=shown,
                host=host,
                address=str(address),
                rule=rule,
            )
    return Target(url=url, scheme=scheme, host=host, port=port, addresses=addresses)


#: Refusals a developer meets when a workflow calls a service on their own machine.
_LOCAL_RULES = frozenset({"loopback"})


def allow_hint(host: str) -> str:
    """How to let a local address through in development: the setting and its format."""
    return (
        f"; to call it in local development, set RELAYFLOW_SSRF_ALLOW='[\"{host}\"]' (a JSON "
        'list of host names and CIDR ranges, e.g. \'["127.0.0.1", "10.0.0.0/8"]\'); never in '
        "production"
    )


def blocked_reason(address: IPAddress) -> tuple[str, str] | None:
    """``(rule, phrase)`` when ``address`` must not be contacted, ``None`` when it is public."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            kind, ipv4 = embedded
            inner = blocked_reason(ipv4)
            if inner is not None:
                return inner[0], f"{kind} embedding {ipv4}, {inner[1]}"
            if address in _MAPPED:
                return None
            if any(address in network for network in _DEPRECATED_EMBEDDING):
                return "reserved", f"{kind} (deprecated)"
    for network, rule, phrase in _BLOCKED:
        if address.version == network.version and address in network:
            return rule, phrase
    if not address.is_global:
        return "reserved", "a reserved address (not globally routable)"
    return None


def normalise_host(host: str) -> str:
    """The form hosts are compared in: lower case, no IPv6 brackets, no trailing root dot,
    IDNA (punycode) for non-ASCII names."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host.endswith(".") and not host.endswith(".."):
        host = host[:-1]
    if not host.isascii():
        import idna  # the same IDNA 2008 encoder httpx uses, so both resolve one name

        try:
            host = idna.encode(host).decode("ascii")
        except idna.IDNAError:
            return host  # left non-ASCII: _check_host_name refuses it
    return host


def redact_url(url: object) -> str:
    """``scheme://host[:port]/`` of ``url`` for messages and logs: no credentials, query or
    path (webhook URLs often carry a secret in the path); ``…`` marks a dropped path."""
    try:
        parts = urlsplit(str(url).strip())
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "(invalid URL)"
    if ":" in host:
        host = f"[{host}]"
    scheme = parts.scheme.lower()
    if port is not None and port != DEFAULT_PORTS.get(scheme):
        host = f"{host}:{port}"
    rest = "" if parts.path in ("", "/") and not parts.query else "…"
    return f"{scheme}://{host}/{rest}" if scheme else f"{host}/{rest}"


@dataclass(frozen=True)
class _Exemptions:
    hosts: frozenset[str]
    networks: tuple[IPNetwork, ...]


@lru_cache(maxsize=32)
def _parse_allow(entries: tuple[str, ...]) -> _Exemptions:
    hosts: set[str] = set()
    networks: list[IPNetwork] = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            hosts.add(normalise_host(entry))
    return _Exemptions(frozenset(hosts), tuple(networks))


def _literal_address(host: str, shown: str) -> IPAddress | None:
    """The address a numeric host stands for, in any spelling inet_aton accepts."""
    if ":" in host:
        try:
            return ipaddress.IPv6Address(unquote(host))
        except ValueError as exc:
            raise SsrfBlocked(
                f"blocked: {host!r} is not a valid IPv6 address (url {shown})",
                url=shown,
                rule="invalid-host",
            ) from exc
    if not _NUMERIC_HOST.fullmatch(host):
        return None
    try:
        packed = socket.inet_aton(host)
    except OSError as exc:
        raise SsrfBlocked(
            f"blocked: {host!r} is not a valid IPv4 address (url {shown})",
            url=shown,
            rule="invalid-host",
        ) from exc
    return ipaddress.IPv4Address(packed)


def _check_host_name(host: str, shown: str) -> None:
    labels = host.split(".")
    if len(host) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        raise SsrfBlocked(
            f"blocked: {host!r} is not a valid host name (url {shown})",
            url=shown,
            rule="invalid-host",
        )


def _resolve(host: str, port: int, resolver: Resolver, shown: str) -> tuple[IPAddress, ...]:
    try:
        answers = resolver(host, port)
    except OSError as exc:
        raise TransientError(
            f"could not resolve {host}: {exc.strerror or exc} (url {shown})", host=host
        ) from exc
    addresses: list[IPAddress] = []
    for answer in answers:
        try:
            address = ipaddress.ip_address(answer.split("%", 1)[0])
        except ValueError as exc:
            raise SsrfBlocked(
                f"blocked: {host} resolved to {answer!r}, which is not an IP address (url {shown})",
                url=shown,
                host=host,
                rule="invalid-address",
            ) from exc
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise TransientError(f"could not resolve {host}: no addresses (url {shown})", host=host)
    return tuple(addresses)


def _getaddrinfo(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


def _embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    if address.ipv4_mapped is not None:
        return "an IPv4-mapped address", address.ipv4_mapped
    if address.sixtofour is not None:
        return "a 6to4 address", address.sixtofour
    if address.teredo is not None:
        server, client = address.teredo
        # The client address is the one a Teredo relay would deliver to; check it first.
        return "a Teredo address", client if blocked_reason(client) else server
    for network, kind in _LOW32_EMBEDDING:
        if address in network and int(address) > 1:
            return kind, ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None
