"""The checks themselves (see :mod:`mail.authentication` for the verdict's shape): SPF through
pyspf, DKIM and ARC through dkimpy, DMARC through :mod:`mail.authentication.dmarc`, every lookup
through :mod:`mail.authentication.resolver`. Imported at the first check (the package's
``check`` and ``unanswered``), so a process starts without dkimpy, pyspf and dnspython."""

from __future__ import annotations

import email.utils
from collections.abc import Sequence

import dkim

from mail.authentication import dmarc
from mail.authentication.adapter import (
    ArcChain,
    arc_chain,
    dkim_signatures,
    has_arc,
    listed_signatures,
    parsed,
    spf_check,
)
from mail.authentication.resolver import Lookups, NotCached

SPF_RESULTS = ("pass", "fail", "softfail", "neutral", "none", "temperror", "permerror")


def _domain_of(address: str) -> str:
    return address.rpartition("@")[2].strip().lower().rstrip(".") if "@" in address else ""


def _from_domains(headers: Sequence[tuple[bytes, bytes]]) -> list[str]:
    values = [
        value.decode("utf-8", "replace").replace("\r\n", "")
        for name, value in headers
        if name.strip().lower() == b"from"
    ]
    return [_domain_of(address) for _, address in email.utils.getaddresses(values) if address]


def _spf(lookups: Lookups, client_ip: str, helo: str, mail_from: str) -> dict:
    verdict = {"result": "none", "domain": "", "identity": "mailfrom", "client_ip": client_ip}
    domain = _domain_of(mail_from)
    if not mail_from:
        verdict["identity"], domain = "helo", helo.lower().rstrip(".")
    verdict["domain"] = domain
    if not client_ip:
        return {**verdict, "reason": "no client address (not received over SMTP)"}
    if not domain:
        return {**verdict, "reason": "no sender domain to check"}
    try:
        result, explanation, identity = spf_check(
            lookups, ip=client_ip, sender=mail_from, helo=helo
        )
    except NotCached:
        raise
    except Exception as error:  # pyspf on input it did not foresee
        return {**verdict, "result": "permerror", "reason": f"{type(error).__name__}"}
    if result not in SPF_RESULTS:
        result = "permerror"
    return {**verdict, "result": result, "identity": identity, "reason": explanation[:200]}


def _dkim(verifier: dkim.DKIM, lookups: Lookups) -> list[dict]:
    return [
        {"result": s.result, "domain": s.domain, "selector": s.selector, "reason": s.reason}
        for s in dkim_signatures(verifier, lookups)
    ]


def _header_block(raw: bytes) -> bytes:
    end = raw.find(b"\r\n\r\n")
    return raw if end < 0 else raw[: end + 4]


def check(
    raw: bytes,
    *,
    client_ip: str,
    helo: str,
    mail_from: str,
    budget: float,
    max_bytes: int | None = None,
    cached_only: bool = False,
) -> dict:
    """The ``authentication`` verdict of ``raw`` (see the module docstring); every DNS lookup
    shares ``budget`` seconds, and one that cannot be answered in time makes its mechanism
    ``temperror``. A message over ``max_bytes`` has its DKIM signatures and ARC chain listed
    as ``neutral``, not verified (hashing its body would hold the SMTP server's interpreter),
    and DMARC, if SPF does not align, is ``temperror``: it could not be decided. With
    ``cached_only``, a lookup whose answer is not kept already raises
    :class:`~mail.authentication.resolver.NotCached` (the caller then checks in a thread)."""
    lookups = Lookups.within(budget, cached_only=cached_only)
    spf = _spf(lookups, client_ip, helo, mail_from)
    headers: Sequence[tuple[bytes, bytes]] = ()
    arc = ArcChain("none", "", 0, "")
    unverified = max_bytes is not None and len(raw) > max_bytes
    try:
        # The header fields read once, for DKIM, ARC and DMARC.
        verifier = parsed(_header_block(raw) if unverified else raw)
    except Exception as error:  # a message dkimpy cannot read at all
        reason = f"unreadable message: {error}"[:200]
        signatures = [{"result": "permerror", "domain": "", "selector": "", "reason": reason}]
    else:
        headers = verifier.headers
        if unverified:
            reason = f"not verified: the message is over {max_bytes} bytes (MAIL_AUTH_MAX_BYTES)"
            signatures = [
                {"result": "neutral", "domain": d, "selector": s, "reason": reason}
                for d, s in listed_signatures(verifier)
            ]
            if has_arc(verifier):
                arc = ArcChain("neutral", "", 0, reason)
        else:
            signatures = _dkim(verifier, lookups)
            if has_arc(verifier):
                arc = arc_chain(raw, lookups)
    verdict = dmarc.evaluate(
        from_domains=_from_domains(headers),
        spf_result=spf["result"],
        spf_domain=spf["domain"],
        dkim_passes=[s["domain"] for s in signatures if s["result"] == "pass"],
        lookups=lookups,
    )
    if unverified and signatures and verdict["result"] == "fail":
        verdict.update(result="temperror", reason="DKIM not verified (MAIL_AUTH_MAX_BYTES)")
    return {
        "spf": spf,
        "dkim": signatures,
        "dmarc": verdict,
        "arc": {
            "result": arc.result,
            "domain": arc.domain,
            "instances": arc.instances,
            "reason": arc.reason,
        },
    }


def unanswered(reason: str, *, client_ip: str = "", helo: str = "", mail_from: str = "") -> dict:
    """The verdict when the checks could not finish at all: every mechanism ``temperror``."""
    return {
        "spf": {
            "result": "temperror",
            "domain": _domain_of(mail_from) or helo,
            "identity": "mailfrom" if mail_from else "helo",
            "client_ip": client_ip,
            "reason": reason,
        },
        "dkim": [],
        "dmarc": {
            "result": "temperror",
            "domain": "",
            "policy": None,
            "alignment": [],
            "reason": reason,
        },
        "arc": {"result": "temperror", "domain": "", "instances": 0, "reason": reason},
    }
