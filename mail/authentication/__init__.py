"""Authentication verdicts of a received message: SPF, DKIM, DMARC and ARC.

:func:`check` takes the message as received and its SMTP facts (client address, HELO name,
envelope sender) and returns the ``authentication`` object stored on the email::

    {"spf":   {"result", "domain", "identity", "client_ip", "reason"},
     "dkim":  [{"result", "domain", "selector", "reason"}, ...],      # one per signature
     "dmarc": {"result", "domain", "policy", "alignment", "reason"},  # alignment: ["dkim", "spf"]
     "arc":   {"result", "domain", "instances", "reason"}}

Results are RFC 8601's: spf ``pass fail softfail neutral none temperror permerror``; dkim
``pass fail neutral temperror permerror`` per signature (no signature: an empty list; neutral:
not verified, the message is over ``MAIL_AUTH_MAX_BYTES``); dmarc ``pass fail none temperror
permerror``; arc ``pass fail none neutral temperror``. A verdict reports;
it never refuses mail (a DMARC ``p=reject`` failure is stored like any other message).

Libraries: pyspf (SPF), dkimpy (DKIM and ARC), dnspython (every lookup, through
:mod:`mail.authentication.resolver`: ``DNS_RESOLVER``, a cache, a deadline per message) and
publicsuffixlist's bundled list (DMARC's organisational domain). Their internals are used in
:mod:`mail.authentication.adapter` only.

Where it runs: in the SMTP server, from the end of DATA until the message joins its batch
(``mail.smtpd.checks``: on the event loop when every answer is cached, else in a thread),
bounded by ``MAIL_AUTH_BUDGET``; so the verdict is stored with the row, label rules see it, and
``email.received`` carries it. docs/architecture.md (The receive path) says why there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["check", "results", "unanswered"]


def __getattr__(name: str) -> Any:
    """``check`` and ``unanswered`` from :mod:`mail.authentication.verdicts`, imported at first
    use: dkimpy, pyspf and dnspython are most of what the checks cost a process's start, and the
    pipeline, the API and the dashboard read verdicts (:func:`results`) without making them."""
    if name in ("check", "unanswered"):
        from mail.authentication import verdicts

        return getattr(verdicts, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def results(authentication: dict | None) -> dict[str, list[str]]:
    """Mechanism → the results it gave (dkim: one per signature, ``["none"]`` when unsigned);
    empty when the message was not checked. What label rules and the dashboard read."""
    if not authentication:
        return {}
    found: dict[str, list[str]] = {}
    for mechanism in ("spf", "dmarc", "arc"):
        entry = authentication.get(mechanism) or {}
        if entry.get("result"):
            found[mechanism] = [entry["result"]]
    signatures: Sequence[dict] = authentication.get("dkim") or []
    found["dkim"] = [s.get("result", "") for s in signatures] or ["none"]
    return found
