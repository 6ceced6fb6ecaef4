"""The DNS lookup that proves control of a custom domain: ``_pigeonhole.<domain>`` TXT.

Blocking, bounded by ``DNS_TIMEOUT``: it runs in a request thread, a Celery task or the
embedded mode's periodic jobs (a worker thread), never on an event loop. The nameserver asked
is ``DNS_RESOLVER`` (``host:port``, ``[v6]:port`` or ``host``), else the system's resolver.
No cache: a record just published is seen at the next check.

dnspython is imported by the lookup: every process imports this module (the inbox services do)
and a domain is checked rarely, in a web request or a job.
"""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from inboxes.models import CheckResult

if TYPE_CHECKING:
    import dns.resolver

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Lookup:
    """What the nameserver said about the record."""

    result: str  # a CheckResult: found, missing or dns_error
    detail: str


def parse_resolver(value: str) -> tuple[str, int]:
    """``"127.0.0.1:5353"`` → ``("127.0.0.1", 5353)``; ``"[::1]:53"`` and a bare address too."""
    value = value.strip()
    host, port = value, "53"
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        port = rest.removeprefix(":") or "53"
    elif value.count(":") == 1:
        host, port = value.split(":")
    try:
        ipaddress.ip_address(host)
        number = int(port)
    except ValueError:
        raise ImproperlyConfigured(
            f"DNS_RESOLVER={value!r}: give the nameserver as ip:port, e.g. 127.0.0.1:53"
        ) from None
    if not 0 < number < 65536:
        raise ImproperlyConfigured(f"DNS_RESOLVER={value!r}: the port is out of range")
    return host, number


def _resolver() -> dns.resolver.Resolver:
    import dns.resolver

    if settings.DNS_RESOLVER:
        host, port = parse_resolver(settings.DNS_RESOLVER)
        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers = [host]
        resolver.port = port
    else:
        resolver = dns.resolver.Resolver()
    resolver.timeout = resolver.lifetime = settings.DNS_TIMEOUT
    resolver.cache = None
    return resolver


def _text(rdata: object) -> str:
    """A TXT record's strings joined (a value over 255 bytes is split into several)."""
    return b"".join(rdata.strings).decode("utf-8", "replace")  # type: ignore[attr-defined]


def lookup(record_name: str, expected: str) -> Lookup:
    """Whether ``record_name`` has a TXT record whose value is exactly ``expected``."""
    import dns.exception
    import dns.name
    import dns.resolver

    try:
        resolver = _resolver()
    except ImproperlyConfigured as error:  # the operator's to fix; the domain stays as it is
        logger.error("%s", error)
        return Lookup(CheckResult.DNS_ERROR, f"{error}"[:500])
    try:
        name = dns.name.from_text(record_name)
        answer = resolver.resolve(name, "TXT", search=False, raise_on_no_answer=False)
    except dns.resolver.NXDOMAIN:
        return Lookup(CheckResult.MISSING, f"{record_name} does not exist.")
    except dns.exception.Timeout:
        return Lookup(CheckResult.DNS_ERROR, "The DNS lookup timed out; it will be tried again.")
    except (dns.exception.DNSException, OSError) as error:
        return Lookup(CheckResult.DNS_ERROR, f"The DNS lookup failed: {error}"[:500])
    values = [_text(rdata) for rdata in answer.rrset or ()]
    if expected in values:
        return Lookup(CheckResult.FOUND, f"Found the TXT record at {record_name}.")
    if not values:
        return Lookup(CheckResult.MISSING, f"{record_name} has no TXT record.")
    found = ", ".join(repr(v[:80]) for v in values[:3])
    return Lookup(
        CheckResult.MISSING,
        f"{record_name} has {len(values)} TXT record(s), none of them {expected!r}: {found}"[:500],
    )
