"""DNS for the authentication checks: one resolver and cache per process, a deadline per message.

The nameserver is ``DNS_RESOLVER`` (as for custom-domain verification), else the system's. Each
lookup waits at most ``MAIL_AUTH_DNS_TIMEOUT`` seconds and never past the message's deadline
(``MAIL_AUTH_BUDGET`` from the start of its checks); once the deadline has passed, every further
lookup of that message is unanswered at once. Answers (and "no such record" answers that carry
their TTL) are kept for their TTL, shared by every check of the process: in a dictionary of
their records in front of dnspython's LRU cache, so that a cached answer costs one lookup in
it. A lookup that went unanswered (timeout, SERVFAIL, refused) is remembered for
``UNANSWERED_SECONDS``, so that a nameserver that has gone silent costs the messages behind it
nothing more than a ``temperror``, not a budget each.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import dns.exception
import dns.name
import dns.rdatatype
import dns.resolver
from django.conf import settings

from inboxes.verification import parse_resolver

UNANSWERED_SECONDS = 30.0
# "No such name" is kept at most this long, whatever the zone's SOA allows (often a day): a
# user who publishes SPF or DMARC records and sends a test message a minute later expects them.
NEGATIVE_MAX_SECONDS = 300.0
CACHE_SIZE = 10_000


class NotCached(Exception):
    """A lookup of a check that may only read answers kept already (``cached_only``)."""


class Unanswered(Exception):
    """The lookup could not be answered in time (timeout, SERVFAIL, no budget left)."""


_lock = threading.Lock()
_shared: dict[str, object] = {}
_unanswered: dict[tuple[str, str], float] = {}
_answers: dict[tuple[str, str], tuple[float, list[object]]] = {}  # key -> (expiry, records)


def _resolver() -> dns.resolver.Resolver:
    """The process's resolver for ``DNS_RESOLVER`` (rebuilt if that setting changes)."""
    configured = settings.DNS_RESOLVER
    with _lock:
        resolver = _shared.get(configured)
        if resolver is None:
            if configured:
                host, port = parse_resolver(configured)
                resolver = dns.resolver.Resolver(configure=False)
                resolver.nameservers = [host]
                resolver.port = port
            else:
                resolver = dns.resolver.Resolver()
            resolver.cache = dns.resolver.LRUCache(CACHE_SIZE)
            _shared.clear()  # one resolver, one cache: the setting's current value
            _answers.clear()  # the answers of the nameserver asked before
            _shared[configured] = resolver
    return resolver  # type: ignore[return-value]


def _keep(key: tuple[str, str], records: list[object], ttl: float) -> None:
    """Keeps an answer for ``ttl`` seconds; a negative one (an empty list: no such name, or no
    record of the type) at most ``NEGATIVE_MAX_SECONDS``, whatever its zone's SOA allows."""
    if not records:
        ttl = min(ttl, NEGATIVE_MAX_SECONDS)
    if ttl > 0:
        if len(_answers) >= CACHE_SIZE:
            _answers.clear()
        _answers[key] = (time.monotonic() + ttl, records)


def _negative_ttl(error: dns.resolver.NXDOMAIN) -> float:
    """How long "no such name" may be kept (RFC 2308): the smaller of the TTL and the MINIMUM
    of the SOA record in the answer's authority section; 0 (not kept) without one. Unsigned
    mail from a domain without SPF or DMARC records asks for such names with every message,
    and a lookup that is not kept cannot be answered on the SMTP server's event loop."""
    for response in error.responses().values():
        for rrset in getattr(response, "authority", ()):
            if rrset.rdtype == dns.rdatatype.SOA and len(rrset):
                return float(min(rrset.ttl, rrset[0].minimum))  # type: ignore[attr-defined]
    return 0.0


@dataclass
class Lookups:
    """The DNS of one message's checks, bounded by ``deadline`` (``time.monotonic()``)."""

    deadline: float
    cached_only: bool = False  # raise NotCached rather than ask the nameserver
    queries: int = 0
    unanswered: list[str] = field(default_factory=list)

    @classmethod
    def within(cls, seconds: float, *, cached_only: bool = False) -> Lookups:
        return cls(deadline=time.monotonic() + seconds, cached_only=cached_only)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def resolve(self, name: str, rdtype: str) -> list[object]:
        """The records of ``name`` (an empty list: the name or the type does not exist);
        :class:`Unanswered` when it cannot be known in time."""
        key = (name.lower().rstrip("."), rdtype)
        now = time.monotonic()
        known = _answers.get(key)
        if known is not None and known[0] > now:
            return known[1]
        if self.cached_only:
            raise NotCached
        until = _unanswered.get(key)
        if until is not None and until > now:
            raise self._unanswered(key, "unanswered moments ago")
        left = self.deadline - now
        if left <= 0:
            raise self._unanswered(key, "time budget spent")
        timeout = min(settings.MAIL_AUTH_DNS_TIMEOUT, left)
        self.queries += 1
        try:
            answer = _resolver().resolve(
                dns.name.from_text(key[0]),
                rdtype,
                lifetime=timeout,
                search=False,
                raise_on_no_answer=False,
            )
        except dns.resolver.NXDOMAIN as error:
            _keep(key, [], _negative_ttl(error))
            return []
        except (dns.exception.DNSException, OSError, ValueError) as error:
            if len(_unanswered) > CACHE_SIZE:
                _unanswered.clear()
            _unanswered[key] = time.monotonic() + UNANSWERED_SECONDS
            raise self._unanswered(key, type(error).__name__) from None
        records = list(answer.rrset or ())
        _keep(key, records, answer.expiration - time.time())
        return records

    def _unanswered(self, key: tuple[str, str], why: str) -> Unanswered:
        self.unanswered.append(f"{key[0]} {key[1]}")
        return Unanswered(f"{key[1]} {key[0]}: {why}")

    def txt(self, name: str) -> list[bytes]:
        """The TXT records of ``name``, each one's strings joined."""
        return [b"".join(r.strings) for r in self.resolve(name, "TXT")]  # type: ignore[attr-defined]


def forget_unanswered() -> None:
    """Forgets which lookups went unanswered (tests that replace the nameserver)."""
    _unanswered.clear()


def forget_answers() -> None:
    """Forgets every answer kept (a nameserver replaced, or records changed within a TTL)."""
    _answers.clear()
    for resolver in _shared.values():
        resolver.cache.flush()  # type: ignore[attr-defined]
