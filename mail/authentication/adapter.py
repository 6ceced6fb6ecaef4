"""The one place that uses pyspf's and dkimpy's internals (pinned in pyproject.toml;
tests/mail/test_authentication_libraries.py fails clearly when either moves).

- pyspf resolves through a module-level function, ``spf.DNSLookup(name, qtype, strict,
  timeout)``, whatever the query: it is replaced, once, by one that asks the current message's
  :class:`~mail.authentication.resolver.Lookups` (a context variable set by :func:`spf_check`),
  so SPF goes through ``DNS_RESOLVER``, the shared cache and the message's deadline.
- dkimpy's ``DKIM.verify()`` answers True or False and logs why; to say *why* a signature
  failed (no key, body altered, bad signature, no answer in time), each signature is taken
  through its steps: ``verify_headerprep(idx)`` then ``verify_sig(...)``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from dataclasses import dataclass

import dkim
import dkim.util
import spf

from mail.authentication.resolver import Lookups, NotCached, Unanswered

PYSPF_VERSION = "2.0.14"
DKIMPY_VERSIONS = ("1.1",)  # the minor versions this adapter was written against

_current: contextvars.ContextVar[Lookups | None] = contextvars.ContextVar("spf_lookups")


def _spf_lookup(name: str, qtype: str, strict: object = True, timeout: float = 0) -> list:
    """``spf.DNSLookup``'s contract: ``[((name, qtype), value), ...]``, values as pyspf's own
    dnspython lookup gives them; ``spf.TempError`` when unanswered."""
    lookups = _current.get(None)
    if lookups is None:
        raise spf.TempError("DNS: no lookups in progress")
    try:
        records = lookups.resolve(name, qtype)
    except Unanswered as error:
        raise spf.TempError(f"DNS {error}") from None
    found: list = []
    for rdata in records:
        if qtype in ("A", "AAAA"):
            found.append(((name, qtype), rdata.address))  # type: ignore[attr-defined]
        elif qtype == "MX":
            found.append(((name, qtype), (rdata.preference, rdata.exchange)))  # type: ignore[attr-defined]
        elif qtype == "PTR":
            found.append(((name, qtype), rdata.target.to_text(True)))  # type: ignore[attr-defined]
        elif qtype in ("TXT", "SPF"):
            found.append(((name, qtype), rdata.strings))  # type: ignore[attr-defined]
    return found


spf.DNSLookup = _spf_lookup


def spf_check(lookups: Lookups, *, ip: str, sender: str, helo: str) -> tuple[str, str, str]:
    """``(result, explanation, identity)`` of SPF for ``sender`` (``MAIL FROM``; the HELO name
    when empty) and the client ``ip``; ``identity`` is ``mailfrom`` or ``helo``."""
    token = _current.set(lookups)
    try:
        query = spf.query(i=ip, s=sender, h=helo, querytime=max(lookups.remaining(), 0.001))
        result, _code, explanation = query.check()
        return result, explanation, query.ident
    finally:
        _current.reset(token)


@dataclass(frozen=True)
class Signature:
    """One DKIM signature's verdict."""

    result: str  # pass, fail, neutral, temperror, permerror
    domain: str
    selector: str
    reason: str


def _text(value: bytes | None) -> str:
    return (value or b"").decode("ascii", "replace")


def parsed(raw: bytes) -> dkim.DKIM:
    """The message as dkimpy reads it (its header fields: ``.headers``); raises on a message it
    cannot read at all."""
    return dkim.DKIM(raw, logger=_QUIET, minkey=1024)


def has_arc(verifier: dkim.DKIM) -> bool:
    return any(name.lower() == b"arc-seal" for name, _ in verifier.headers)


def listed_signatures(verifier: dkim.DKIM) -> list[tuple[str, str]]:
    """``(domain, selector)`` of every DKIM-Signature, topmost first, without verifying."""
    found = []
    for name, value in verifier.headers:
        if name.lower() == b"dkim-signature":
            try:
                tags = dkim.util.parse_tag_value(value)
            except Exception:
                tags = {}
            found.append((_text(tags.get(b"d")), _text(tags.get(b"s"))))
    return found


def dkim_signatures(verifier: dkim.DKIM, lookups: Lookups) -> Iterator[Signature]:
    """Every DKIM-Signature of the message, topmost first, each verified on its own."""

    def dnsfunc(name: bytes, timeout: float = 0) -> bytes | None:
        records = lookups.txt(name.decode("ascii", "replace"))  # Unanswered propagates
        return records[0] if records else None

    count = sum(1 for name, _ in verifier.headers if name.lower() == b"dkim-signature")
    for idx in range(count):
        domain = selector = ""
        try:
            prep = verifier.verify_headerprep(idx)
            if not prep:
                continue
            sig, include_headers, headers = prep
            domain, selector = _text(sig.get(b"d")), _text(sig.get(b"s"))
            key_name = sig[b"s"] + b"._domainkey." + sig[b"d"]
            if dnsfunc(key_name) is None:  # cached for verify_sig below
                yield Signature("permerror", domain, selector, "no key published for selector")
                continue
            valid = verifier.verify_sig(sig, include_headers, headers[idx], dnsfunc)
        except Unanswered as error:
            yield Signature("temperror", domain, selector, f"key lookup unanswered: {error}")
            continue
        except dkim.ValidationError as error:
            reason = str(error)
            if reason.startswith("body hash mismatch"):
                reason = "body hash mismatch (the body was altered)"
            yield Signature("fail", domain, selector, reason)
            continue
        except dkim.DKIMException as error:
            yield Signature("permerror", domain, selector, str(error)[:200])
            continue
        except NotCached:
            raise
        except Exception as error:  # a malformed signature dkimpy did not foresee
            yield Signature("permerror", domain, selector, f"{type(error).__name__}: {error}"[:200])
            continue
        if valid:
            yield Signature("pass", domain, selector, "")
        else:
            yield Signature("fail", domain, selector, "signature did not verify")


@dataclass(frozen=True)
class ArcChain:
    result: str  # pass, fail, none, neutral (not verified), temperror
    domain: str
    instances: int
    reason: str


def arc_chain(raw: bytes, lookups: Lookups) -> ArcChain:
    """The ARC chain's validation (RFC 8617 ``cv``): pass, fail or none."""

    def dnsfunc(name: bytes, timeout: float = 0) -> bytes | None:
        records = lookups.txt(name.decode("ascii", "replace"))
        return records[0] if records else None

    try:
        cv, results, reason = dkim.ARC(raw, logger=_QUIET, minkey=1024).verify(dnsfunc=dnsfunc)
    except Unanswered as error:
        return ArcChain("temperror", "", 0, f"key lookup unanswered: {error}")
    except NotCached:
        raise
    except Exception as error:  # malformed ARC headers
        return ArcChain("fail", "", 0, f"{type(error).__name__}: {error}"[:200])
    domain = _text(results[0].get("as-domain")) if results else ""
    if cv == dkim.CV_Pass:
        return ArcChain("pass", domain, len(results), "")
    if cv == dkim.CV_None and not results:
        return ArcChain("none", "", 0, "")
    return ArcChain("fail", domain, len(results), str(reason)[:200])


class _Quiet:
    """dkimpy logs every failed signature at error level; a verdict is not our error."""

    def __getattr__(self, name: str) -> object:
        return lambda *args, **kwargs: None

    def isEnabledFor(self, level: int) -> bool:
        return False


_QUIET = _Quiet()
