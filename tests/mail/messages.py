"""Builders of real MIME messages for the mail tests (the standard library writes them)."""

from __future__ import annotations

from email.message import EmailMessage
from email.policy import SMTP
from email.utils import formataddr, make_msgid

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
    b"\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00"
    b"\x00\x00IEND\xaeB`\x82"
)
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n" + bytes(range(256)) * 4


def message(
    *,
    to: str | list[str] = "inbox@pigeonhole.test",
    sender: str = "noreply@service.example",
    sender_name: str = "",
    subject: str = "Hello",
    text: str | None = "Hello there.",
    html: str | None = None,
    attachments: list[tuple[str, str, bytes]] = (),  # type: ignore[assignment]
    inline_png: str | None = None,
    headers: dict[str, str] | None = None,
    cte: str | None = None,
) -> bytes:
    msg = EmailMessage()
    msg["From"] = formataddr((sender_name, sender)) if sender_name else sender
    msg["To"] = ", ".join(to) if isinstance(to, list) else to
    msg["Subject"] = subject
    msg["Message-ID"] = make_msgid(domain="service.example")
    for name, value in (headers or {}).items():
        msg[name] = value
    if text is not None:
        msg.set_content(text, cte=cte) if cte else msg.set_content(text)
    if html is not None:
        if text is None:
            msg.set_content(html, subtype="html")
        else:
            msg.add_alternative(html, subtype="html")
    if inline_png is not None:
        html_part = msg.get_payload()[-1] if msg.is_multipart() else msg
        html_part.add_related(PNG, "image", "png", cid=f"<{inline_png}>")
    for filename, content_type, content in attachments:
        maintype, subtype = content_type.split("/")
        msg.add_attachment(content, maintype=maintype, subtype=subtype, filename=filename)
    return msg.as_bytes(policy=SMTP)  # CRLF, exactly as it travels
