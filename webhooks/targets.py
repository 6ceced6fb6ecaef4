"""Where webhooks may go: URL checks at create time and the resolved address at connect time.

Targets that resolve to loopback, private, link-local, multicast, reserved, CGNAT or otherwise
non-global addresses (IPv4-mapped and NAT64 IPv6 forms included) are refused unless
``WEBHOOK_ALLOW_PRIVATE_TARGETS``. The sender connects to the very address it checked (the host
name is kept for ``Host`` and TLS), so a name that resolves differently a second later (DNS
rebinding) cannot slip through.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class TargetRefused(Exception):
    """The URL may not be called."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    address: str  # the checked IP to connect to
    path: str  # path and query


def _is_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return _is_public(ip.ipv4_mapped)
        if ip in _NAT64:
            return _is_public(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
        if ip.sixtofour is not None or ip.teredo is not None:
            return False
    return ip.is_global and not ip.is_multicast


def split(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path) of an http(s) URL, or TargetRefused."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise TargetRefused(f"Not a valid URL: {exc}.") from None
    if parts.scheme not in ("http", "https"):
        raise TargetRefused("Only http and https URLs are allowed.")
    if not parts.hostname:
        raise TargetRefused("The URL has no host.")
    if parts.username or parts.password:
        raise TargetRefused("Credentials in the URL are not allowed.")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80), path


def resolve(url: str) -> Target:
    """The checked target of ``url``: the first allowed address it resolves to."""
    scheme, host, port, path = split(url)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise TargetRefused(f"Cannot resolve {host}: {exc}.") from None
    addresses = [info[4][0] for info in infos]
    if not settings.WEBHOOK_ALLOW_PRIVATE_TARGETS:
        for address in addresses:
            if not _is_public(ipaddress.ip_address(address.split("%")[0])):
                raise TargetRefused(f"{host} resolves to a non-public address ({address}).")
    if not addresses:
        raise TargetRefused(f"Cannot resolve {host}.")
    return Target(scheme, host, port, addresses[0], path)


def check_url(url: str) -> None:
    """Create-time check: the URL's form, and its addresses when it resolves now. A name that
    does not resolve yet is accepted; every attempt checks again before it connects."""
    split(url)
    try:
        resolve(url)
    except TargetRefused as exc:
        if not str(exc).startswith("Cannot resolve"):
            raise
