"""What an outbox item sends, read back from its MIME message, and the HTML that replaces the
HTML part when an approver edits the text.

The approval page shows :func:`outgoing_parts` of the item's stored message (the bytes the
relay gets), so a person approves exactly what goes out, forwarded copies and their
attachments included. :func:`text_as_html` is the one rendering of an edited text; the page's
live preview (``static/js/approvals.js``) mirrors it character for character.
"""

from __future__ import annotations

import email
import re
from dataclasses import dataclass, field
from email import policy
from email.message import EmailMessage
from email.utils import getaddresses

from django.templatetags.static import static
from django.utils.html import escape

from mail.message.sanitize import email_document, sanitize_html


def text_as_html(text: str) -> str:
    """The edited text as the HTML part: escaped, paragraphs at blank lines, ``<br>`` in them."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    paragraphs = re.split(r"\n{2,}", text)
    return "\n\n".join(f"<p>{escape(p).replace(chr(10), '<br>')}</p>" for p in paragraphs)


@dataclass(frozen=True)
class Attachment:
    filename: str
    content_type: str
    size: int


@dataclass
class OutgoingParts:
    """Everything a recipient gets: headers that address it, the parts, the attachments."""

    to: list[str] = field(default_factory=list)
    cc: list[str] = field(default_factory=list)
    bcc: list[str] = field(default_factory=list)
    subject: str = ""
    text: str | None = None
    html: str | None = None
    attachments: list[Attachment] = field(default_factory=list)

    @property
    def html_document(self) -> str:
        """The HTML part made safe to show (nh3), as a document for a sandboxed frame, with the
        readable defaults of the email view's frame."""
        return email_document(
            sanitize_html(self.html or "").html,
            title=self.subject,
            stylesheet=static("css/mail-frame.css"),
        )


def _addresses(message: EmailMessage, name: str) -> list[str]:
    return [address for _, address in getaddresses(message.get_all(name, [])) if address]


def outgoing_parts(raw: bytes) -> OutgoingParts:
    """The parts of a stored outgoing message, as its recipients' mail programs see them."""
    message = email.message_from_bytes(raw, policy=policy.default)
    assert isinstance(message, EmailMessage)
    parts = OutgoingParts(
        to=_addresses(message, "To"),
        cc=_addresses(message, "Cc"),
        bcc=_addresses(message, "Bcc"),
        subject=str(message.get("Subject", "")),
    )
    text, html = message.get_body(("plain",)), message.get_body(("html",))
    # Shown with the line ends a reader's program shows (SMTP carries CRLF).
    parts.text = text.get_content().replace("\r\n", "\n") if text is not None else None
    parts.html = html.get_content().replace("\r\n", "\n") if html is not None else None
    for attachment in message.iter_attachments():
        payload = attachment.get_payload(decode=True) or b""
        parts.attachments.append(
            Attachment(
                filename=attachment.get_filename() or "(no name)",
                content_type=attachment.get_content_type(),
                size=len(payload),
            )
        )
    return parts
