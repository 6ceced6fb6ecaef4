"""The MIME message of an outbox item (standard library ``email``, SMTP policy: CRLF)."""

from __future__ import annotations

import re
import uuid
from email.errors import HeaderParseError
from email.headerregistry import Address
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime, formataddr

from django.utils import timezone

LOOP_HEADER = "X-Pigeonhole-Forwarded-By"
FORWARD_VIA = "via Pigeonhole"
# Headers of a received message that speak for its sender: a forwarded copy replaces them, so
# that it never claims to come from the original sender (who did not send it to forward_to).
SENDER_HEADERS = frozenset(
    {"from", "sender", "reply-to", "return-path", "dkim-signature", LOOP_HEADER.lower()}
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


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


def _one_line(text: str, limit: int) -> str:
    return " ".join(_CONTROL.sub(" ", text).split())[:limit]


def forward_display_name(sender_address: str, sender_name: str) -> str:
    """``Name <address> via Pigeonhole``: who sent the original, said in a display name only."""
    sender_name, sender_address = _one_line(sender_name, 150), _one_line(sender_address, 320)
    if sender_name and sender_address:
        original = f"{sender_name} <{sender_address}>"
    else:
        original = sender_name or sender_address or "unknown sender"
    return f"{original} {FORWARD_VIA}"


def _address(display_name: str, address: str) -> Address | None:
    local, _, domain = address.rpartition("@")
    try:
        return Address(display_name=display_name, username=local, domain=domain)
    except (HeaderParseError, ValueError, IndexError):
        return None


def _header_fields(head: bytes) -> list[bytes]:
    """The header block split into whole fields (a field keeps its continuation lines)."""
    fields: list[bytes] = []
    for line in head.splitlines(keepends=True):
        if fields and line[:1] in (b" ", b"\t"):
            fields[-1] += line
        else:
            fields.append(line)
    return fields


def forwarded(
    raw: bytes, *, inbox_address: str, sender_address: str, sender_name: str
) -> tuple[bytes, str]:
    """The copy for ``forward_to`` and its From display name: From the inbox's own address with
    the original sender as display name, Reply-To the original sender, the loop guard, and the
    rest of the message (other headers, body, attachments) byte for byte as received."""
    crlf, lf = raw.find(b"\r\n\r\n"), raw.find(b"\n\n")
    if crlf >= 0 and (lf < 0 or crlf < lf):
        eol, head, rest = b"\r\n", raw[: crlf + 2], raw[crlf + 2 :]  # rest: blank line, body
    elif lf >= 0:
        eol, head, rest = b"\n", raw[: lf + 1], raw[lf + 1 :]
    else:  # no body: the message's own line ends, else SMTP's
        eol = b"\n" if b"\n" in raw and b"\r\n" not in raw else b"\r\n"
        head, rest = raw, b""
    if head and not head.endswith(b"\n"):
        head += eol
    rest = rest or eol  # no body: the header block still ends with a blank line
    kept = [
        field
        for field in _header_fields(head)
        if field.split(b":", 1)[0].strip().lower().decode("latin-1") not in SENDER_HEADERS
    ]
    display = forward_display_name(sender_address, sender_name)
    ours = EmailMessage(policy=SMTP.clone(linesep=eol.decode()))
    ours["From"] = _address(display, inbox_address) or inbox_address
    reply_to = _address(_one_line(sender_name, 150), sender_address) if sender_address else None
    if reply_to is not None:
        ours["Reply-To"] = reply_to
    ours[LOOP_HEADER] = inbox_address
    new = b"".join(ours.policy.fold_binary(name, value) for name, value in ours.items())
    return new + b"".join(kept) + rest, display


def has_loop_header(headers: list[tuple[str, str]] | list[list[str]]) -> bool:
    return any(name.lower() == LOOP_HEADER.lower() for name, _ in headers)
