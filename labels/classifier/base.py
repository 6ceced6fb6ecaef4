"""The plain data classifier backends exchange (no Django models cross this line).

:class:`EmailFacts` carries, besides sender, subject and text, the *structural signals* of a
message that its words do not show: mailing-list and bulk headers, auto-submission, a bulk-mail
service's fingerprint, a reply's ``In-Reply-To``, a personal mail client, a single plain-text
part. :func:`signals_of` reads them from headers; :func:`facts_of` is the one place a stored
email's facts are built. The text-borne signals (quoted history, a signature block, the ratio of
links to words, a ``no-reply`` sender) are read by the backend from the text itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

# The structural signals (docs/api.md, "Labels"): names a backend and a stored example share.
SIGNALS = frozenset(
    {
        "list",  # List-Id / List-Post / Precedence: list: sent through a mailing list
        "unsubscribe",  # List-Unsubscribe
        "bulk",  # Precedence: bulk / junk
        "auto",  # Auto-Submitted (not "no"), X-Autoreply, Precedence: auto_reply
        "esp",  # the fingerprint of a bulk-mail service (Mailchimp, SendGrid, Amazon SES, ...)
        "reply",  # In-Reply-To or References: part of a conversation
        "mua",  # written in a personal mail client (User-Agent / X-Mailer)
        "plain",  # one plain-text part: no HTML alternative
    }
)

# Header names (lower case) by which bulk-mail services mark what they send.
_ESP_HEADERS = frozenset(
    {
        "x-mailchimp-campaign",
        "x-mc-user",
        "x-mandrill-user",
        "x-campaign",
        "x-campaignid",
        "x-sg-eid",
        "x-sg-id",
        "x-ses-outgoing",
        "x-ses-message-id",
        "x-mailgun-sid",
        "x-mailgun-tag",
        "x-pm-message-id",
        "x-postmark-server",
        "x-sib-id",
        "x-mailjet-campaign",
        "x-mj-mid",
        "x-csa-complaints",
        "x-sfmc-stack",
        "x-hs-cid",
        "x-marketo-id",
        "x-klaviyo-message-id",
        "x-braze-campaign",
        "x-customerio-message",
        "x-mailer-sid",
        "x-emarsys-identify",
        "x-rpcampaign",
        "x-msys-api",
        "x-sparkpost-id",
    }
)
# Values of Feedback-ID, Message-ID, Return-Path or X-Mailer that name one.
_ESP_VALUES = re.compile(
    r"amazonses|sendgrid|mailchimp|mcsv\.net|mandrillapp|mailgun|postmarkapp|sparkpost|"
    r"sendinblue|brevo|mailjet|exacttarget|hubspot|klaviyo|customer\.io|mktomail|rsgsv|"
    r"salesforce|braze|emarsys|constantcontact|campaign-?monitor|createsend",
    re.IGNORECASE,
)
_ESP_VALUE_HEADERS = frozenset({"feedback-id", "message-id", "return-path", "x-mailer", "sender"})
# Personal mail clients (User-Agent / X-Mailer); automated senders name libraries or nothing.
_MUA = re.compile(
    r"thunderbird|apple mail|iphone mail|ipad mail|microsoft outlook|outlook for|mutt|"
    r"evolution|kmail|claws|roundcube|sogo|airmail|spark|mailmate|canary|geary|"
    r"k-9|fairemail|protonmail web|gmail|yahoo mail|horde|zimbra|squirrelmail",
    re.IGNORECASE,
)


def signals_of(
    headers: Iterable[Sequence[str]],
    *,
    in_reply_to: str = "",
    has_html: bool = False,
    has_text: bool = True,
    has_attachments: bool = False,
) -> frozenset[str]:
    """The structural signals of a message's headers and parts (a subset of :data:`SIGNALS`)."""
    found: set[str] = set()
    for pair in headers:
        if len(pair) < 2:
            continue
        name, value = str(pair[0]).strip().lower(), str(pair[1]).strip()
        low = value.lower()
        if name in ("list-id", "list-post"):
            found.add("list")
        elif name == "list-unsubscribe":
            found.add("unsubscribe")
        elif name == "precedence":
            if low in ("bulk", "junk"):
                found.add("bulk")
            elif low == "list":  # a list server's mark: the same fact as List-Id, not bulk mail
                found.add("list")
            elif low == "auto_reply":
                found.add("auto")
        elif name == "auto-submitted":
            if low and low != "no":
                found.add("auto")
        elif name in ("x-autoreply", "x-autorespond", "x-auto-response-suppress"):
            found.add("auto")
        elif name in ("in-reply-to", "references") and value:
            found.add("reply")
        if name in _ESP_HEADERS or (name in _ESP_VALUE_HEADERS and _ESP_VALUES.search(value)):
            found.add("esp")
        if name in ("user-agent", "x-mailer") and _MUA.search(value):
            found.add("mua")
    if in_reply_to.strip():
        found.add("reply")
    if has_text and not has_html and not has_attachments:
        found.add("plain")
    return frozenset(found)


@dataclass(frozen=True, slots=True)
class EmailFacts:
    """What a classifier may read of an email."""

    from_address: str
    from_name: str
    subject: str
    text: str  # the text body, or the HTML rendered to text when there is none
    signals: frozenset[str] = frozenset()  # structural signals (:data:`SIGNALS`)


class StoredEmail(Protocol):
    """What ``facts_of`` reads of a stored email (a ``mail.Email``; labels never import mail)."""

    from_address: str
    from_name: str
    subject: str
    text: str
    html: str
    headers: list
    in_reply_to: str
    has_attachments: bool

    @property
    def plain_text(self) -> str: ...


def facts_of(email: StoredEmail) -> EmailFacts:
    """The classifier's facts of a stored email: the one place they are built."""
    return EmailFacts(
        from_address=email.from_address,
        from_name=email.from_name,
        subject=email.subject,
        text=email.plain_text,
        signals=signals_of(
            email.headers or (),
            in_reply_to=email.in_reply_to,
            has_html=bool(email.html),
            has_text=bool(email.text),
            has_attachments=email.has_attachments,
        ),
    )


@dataclass(frozen=True, slots=True)
class Example:
    """A labelled example from the workspace: ``positive`` is whether the label applies."""

    email: EmailFacts
    positive: bool


@dataclass(frozen=True, slots=True)
class Verdict:
    answer: bool  # yes/no to the question
    confidence: float  # in [0, 1]: how sure the backend is of ``answer``
    reason: str  # a short human-readable explanation


class Backend(Protocol):
    def classify(
        self, *, question: str, email: EmailFacts, examples: Sequence[Example] = ()
    ) -> Verdict: ...
