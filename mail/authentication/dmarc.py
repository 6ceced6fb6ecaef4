"""DMARC (RFC 7489): the From domain's policy record, and alignment of SPF and DKIM with it.

The organisational domain comes from the Public Suffix List bundled with ``publicsuffixlist``
(a snapshot in the package; never fetched at run time: upgrading the package updates it).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from publicsuffixlist import PublicSuffixList

from mail.authentication.resolver import Lookups, Unanswered

POLICIES = ("none", "quarantine", "reject")


@functools.cache
def _psl() -> PublicSuffixList:
    return PublicSuffixList()  # the bundled snapshot (public_suffix_list.dat in the package)


def organizational_domain(domain: str) -> str:
    """``mail.example.co.uk`` → ``example.co.uk``; a public suffix itself stays as it is."""
    domain = domain.lower().rstrip(".")
    return _psl().privatesuffix(domain) or domain


def aligned(a: str, b: str, mode: str) -> bool:
    """Whether domains ``a`` and ``b`` align: strictly (``s``: equal) or relaxed (``r``: the
    same organisational domain)."""
    a, b = a.lower().rstrip("."), b.lower().rstrip(".")
    if not a or not b:
        return False
    if mode == "s":
        return a == b
    return organizational_domain(a) == organizational_domain(b)


@dataclass(frozen=True)
class Record:
    tags: dict[str, str]
    at: str  # the domain whose _dmarc record it is


def _parse(value: bytes) -> dict[str, str] | None:
    text = value.decode("utf-8", "replace").strip()
    tags: dict[str, str] = {}
    for part in text.split(";"):
        key, sep, val = part.partition("=")
        if sep:
            tags.setdefault(key.strip().lower(), val.strip())
    if tags.get("v") != "DMARC1":
        return None
    return tags


def _record_at(domain: str, lookups: Lookups) -> Record | None:
    records = [t for t in (_parse(v) for v in lookups.txt(f"_dmarc.{domain}")) if t is not None]
    if len(records) != 1:  # none, or several: no policy (RFC 7489 6.6.3)
        return None
    return Record(records[0], domain)


def evaluate(
    *,
    from_domains: Sequence[str],
    spf_result: str,
    spf_domain: str,
    dkim_passes: Sequence[str],
    lookups: Lookups,
) -> dict:
    """The DMARC verdict ``{result, domain, policy, alignment, reason}``."""
    verdict: dict = {"result": "none", "domain": "", "policy": None, "alignment": [], "reason": ""}
    domains = {d.lower().rstrip(".") for d in from_domains if d}
    if len(domains) != 1:
        verdict["reason"] = "no From domain" if not domains else "several From domains"
        verdict["result"] = "none" if not domains else "permerror"
        return verdict
    domain = domains.pop()
    verdict["domain"] = domain
    try:
        record = _record_at(domain, lookups)
        organisational = organizational_domain(domain)
        if record is None and organisational != domain:
            record = _record_at(organisational, lookups)
    except Unanswered as error:
        verdict.update(result="temperror", reason=f"policy lookup unanswered: {error}")
        return verdict
    if record is None:
        verdict["reason"] = "no DMARC record"
        return verdict
    tags = record.tags
    policy = tags.get("p", "").lower()
    if record.at != domain:  # the organisational domain's record: its sp= for subdomains
        policy = tags.get("sp", policy).lower()
    if policy not in POLICIES:
        verdict.update(result="permerror", reason=f"invalid policy {policy!r}")
        return verdict
    verdict["policy"] = policy
    alignment = []
    if any(aligned(d, domain, tags.get("adkim", "r").lower()) for d in dkim_passes):
        alignment.append("dkim")
    if spf_result == "pass" and aligned(spf_domain, domain, tags.get("aspf", "r").lower()):
        alignment.append("spf")
    verdict["alignment"] = alignment
    if alignment:
        verdict["result"] = "pass"
    else:
        verdict["result"] = "fail"
        verdict["reason"] = "neither SPF nor DKIM passed aligned with the From domain"
    return verdict
