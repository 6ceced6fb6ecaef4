"""The MIME message of an outbox item (standard library ``email``, SMTP policy: CRLF)."""

from __future__ import annotations

import uuid
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime, formataddr

from django.utils import timezone

LOOP_HEADER = "X-Pigeonhole-Forwarded-By"


def new_message_id(domain: str) -> str:
    return f"{uuid.uuid4().hex}@{domain}"


def build(
    *,
    from_address: str,
    from_name: str,
    to: list[str],
    cc: list[str],
    subject: str,
    text: str,
    html: str,
    message_id: str,
    in_reply_to: str = "",
    references: list[str] | None = None,
) -> bytes:
    """``multipart/alternative`` when there is HTML, else text/plain."""
    msg = EmailMessage(policy=SMTP)
    # A display name is one line: names stored before input was checked may hold line breaks.
    from_name = " ".join(from_name.split())
    msg["From"] = formataddr((from_name, from_address)) if from_name else from_address
    msg["To"] = ", ".join(to)
    if cc:
        msg["Cc"] = ", ".join(cc)
    msg["Subject"] = subject
    msg["Date"] = format_datetime(timezone.now())
    msg["Message-ID"] = f"<{message_id}>"
    if in_reply_to:
        msg["In-Reply-To"] = f"<{in_reply_to}>"
        msg["References"] = " ".join(f"<{ref}>" for ref in (references or [in_reply_to]))
    msg.set_content(text)
    if html:
        msg.add_alternative(html, subtype="html")
    return msg.as_bytes()


def with_loop_header(raw: bytes, inbox_address: str) -> bytes:
    """The forwarded copy: the original bytes with our loop-guard header in front."""
    return f"{LOOP_HEADER}: {inbox_address}\r\n".encode() + raw


def has_loop_header(headers: list[tuple[str, str]] | list[list[str]]) -> bool:
    return any(name.lower() == LOOP_HEADER.lower() for name, _ in headers)
