"""Where webhooks may go: URL checks at create time and the resolved address at connect time.

Targets that resolve to loopback, private, link-local, multicast, reserved, CGNAT or otherwise
non-global addresses are refused unless ``WEBHOOK_ALLOW_PRIVATE_TARGETS``: the IANA special-purpose
registries are spelled out below (not left to the Python version's ``is_global``), IPv6 must be
global unicast (2000::/3), and IPv6 forms that embed an IPv4 address (mapped, compatible,
translated, NAT64) are judged by that address. The sender connects to the very address it
checked (the host name is kept for ``Host`` and TLS), so a name that resolves differently a second
later (DNS rebinding) cannot slip through.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import socket
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from django.conf import settings

# Never a public webhook target: the IANA IPv4 and IPv6 Special-Purpose Address Registries (every
# block that is not globally reachable, and a few that are but only as anycast services) and
# multicast. Checked on top of ``ipaddress``' own ``is_global``, whose tables differ between Python
# versions (3.11 calls 192.0.0.8, fec0::1, 5f00::1 and ::127.0.0.1 global).
_NOT_PUBLIC_V4 = tuple(
    ipaddress.IPv4Network(block)
    for block in (
        "0.0.0.0/8",  # "this network"
        "10.0.0.0/8",  # private
        "100.64.0.0/10",  # shared address space (CGNAT)
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local (cloud metadata services)
        "172.16.0.0/12",  # private
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation (TEST-NET-1)
        "192.31.196.0/24",  # AS112-v4
        "192.52.193.0/24",  # AMT
        "192.88.99.0/24",  # deprecated 6to4 relay anycast
        "192.168.0.0/16",  # private
        "192.175.48.0/24",  # direct delegation AS112 service
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation (TEST-NET-2)
        "203.0.113.0/24",  # documentation (TEST-NET-3)
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and the limited broadcast address
    )
)
# IANA allocates global unicast from 2000::/3 only: every other IPv6 address (loopback, ::,
# link-local, site-local, unique-local, multicast, discard-only, SRv6 …) is not a public target.
_GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
_NOT_PUBLIC_V6 = tuple(
    ipaddress.IPv6Network(block)
    for block in (
        "2001::/23",  # IETF protocol assignments (Teredo, benchmarking, ORCHID …)
        "2001:db8::/32",  # documentation
        "2002::/16",  # 6to4: lands on whatever IPv4 address it embeds
        "3fff::/20",  # documentation
    )
)
# IPv6 forms that carry an IPv4 address in their last 32 bits: the IPv4 address decides.
_EMBEDS_V4 = tuple(
    ipaddress.IPv6Network(block)
    for block in (
        "::ffff:0:0/96",  # IPv4-mapped
        "::/96",  # IPv4-compatible (deprecated; includes :: and ::1)
        "::ffff:0:0:0/96",  # IPv4-translated (SIIT)
        "64:ff9b::/96",  # NAT64 well-known prefix
    )
)
# Names that are never public, whatever a resolver answers (or whether it answers at all):
# localhost and every name under it (RFC 6761), multicast DNS (.local, RFC 6762), home networks
# (home.arpa, RFC 8375) and private-use names (.internal, ICANN 2024; metadata.google.internal).
_PRIVATE_ZONES = ("localhost", "local", "home.arpa", "internal")
_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)\Z")
_INET_ATON_CHARS = frozenset("0123456789abcdefx.")
PORT_RANGE = "The port must be a number from 1 to 65535."


class TargetRefused(Exception):
    """The URL may not be called."""


class Unresolvable(TargetRefused):
    """The host name does not resolve (now): refused at send time, accepted at create time."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    address: str  # the checked IP to connect to
    path: str  # path and query


def _is_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address):
        for block in _EMBEDS_V4:
            if ip in block:
                return _is_public(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
        return (
            ip in _GLOBAL_UNICAST_V6
            and not any(ip in block for block in _NOT_PUBLIC_V6)
            and ip.is_global
        )
    return not any(ip in block for block in _NOT_PUBLIC_V4) and ip.is_global


def split(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path) of an http(s) URL, or TargetRefused."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise TargetRefused(f"Not a valid URL: {exc}.") from None
    try:
        port = parts.port
    except ValueError:  # not ASCII digits, or above 65535
        raise TargetRefused(PORT_RANGE) from None
    if parts.scheme not in ("http", "https"):
        raise TargetRefused("Only http and https URLs are allowed.")
    if not parts.hostname:
        raise TargetRefused("The URL has no host.")
    if parts.username or parts.password:
        raise TargetRefused("Credentials in the URL are not allowed.")
    if port == 0:
        # No server listens on port 0, and ``port or default`` took it for the scheme's default
        # port: the URL said one thing and the sender called another.
        raise TargetRefused(PORT_RANGE)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    default = 443 if parts.scheme == "https" else 80
    return parts.scheme, parts.hostname, default if port is None else port, path


def _private_name(name: str) -> bool:
    name = name.removesuffix(".")
    return any(name == zone or name.endswith(f".{zone}") for zone in _PRIVATE_ZONES)


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IP address a host is written as, if it is one: IPv6 (with an RFC 6874 zone such as
    ``%25eth0``), or any IPv4 spelling libc accepts (``127.1``, ``0x7f.1``, ``2130706433``,
    ``0177.0.0.1``), with or without a trailing dot. Judged here, never left to a resolver."""
    if ":" in host:
        try:
            return ipaddress.IPv6Address(unquote(host))
        except ValueError:
            raise TargetRefused(f"{host} is not a valid IPv6 address.") from None
    candidate = host.removesuffix(".")
    if candidate and set(candidate.lower()) <= _INET_ATON_CHARS:
        try:
            return ipaddress.IPv4Address(socket.inet_aton(candidate))
        except OSError:
            return None  # a name made of hex letters, such as cafe.be
    return None


def _name(host: str) -> str:
    """The host name as a resolver sees it (IDNA, lower case), or TargetRefused."""
    try:
        name = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise TargetRefused(f"{host} is not a valid host name.") from None
    labels = name.removesuffix(".").split(".")
    if len(name) > 253 or not all(_LABEL.match(label) for label in labels):
        raise TargetRefused(f"{host} is not a valid host name.")
    return name


def resolve(url: str) -> Target:
    """The checked target of ``url``: the first allowed address it resolves to."""
    scheme, host, port, path = split(url)
    allow_private = settings.WEBHOOK_ALLOW_PRIVATE_TARGETS
    literal = _literal(host)
    if literal is not None:
        addresses = [str(literal)]
    else:
        name = _name(host)
        if not allow_private and _private_name(name):
            raise TargetRefused(f"{host} is a local name, never a public address.")
        try:
            infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise Unresolvable(f"Cannot resolve {host}: {exc}.") from None
        addresses = [info[4][0] for info in infos]
        if not addresses:
            raise Unresolvable(f"Cannot resolve {host}.")
    if not allow_private:
        for address in addresses:
            if not _is_public(ipaddress.ip_address(address.split("%")[0])):
                raise TargetRefused(f"{host} resolves to a non-public address ({address}).")
    return Target(scheme, host, port, addresses[0], path)


def check_url(url: str) -> None:
    """Create-time check: the URL's form, and its addresses when it resolves now. A name that
    does not resolve yet is accepted; every attempt checks again before it connects."""
    with contextlib.suppress(Unresolvable):
        resolve(url)
