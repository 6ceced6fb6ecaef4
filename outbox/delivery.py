"""Handing a sent item to its recipients: hosted addresses through the receive pipeline, the
rest through Django's email backend (``EMAIL_URL``'s SMTP relay, or Amazon SES via django-ses).
Failures are sorted into permanent (a 5xx, a rejected message) and transient (everything else)."""

from __future__ import annotations

import smtplib
from dataclasses import dataclass
from typing import Any

from django.core.mail import EmailMessage, get_connection

from inboxes import selectors as inbox_selectors
from inboxes.addresses import split_address
from mail import pipeline


class _Prebuilt:
    """What Django's backends call ``message()`` for: our bytes, exactly."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    def as_bytes(self, *args: Any, **kwargs: Any) -> bytes:
        return self.raw

    def as_string(self, *args: Any, **kwargs: Any) -> str:
        return self.raw.decode("utf-8", "surrogateescape")


class RawEmail(EmailMessage):
    def __init__(self, raw: bytes, from_email: str, recipients: list[str]) -> None:
        super().__init__(from_email=from_email, to=recipients)
        self._raw = raw

    def message(self, *args: Any, **kwargs: Any) -> Any:
        return _Prebuilt(self._raw)


@dataclass(frozen=True)
class Failure(Exception):
    message: str
    permanent: bool


def split_recipients(addresses: list[str]) -> tuple[list[str], list[str]]:
    """(hosted here, elsewhere)."""
    internal, external = [], []
    for address in addresses:
        _, domain = split_address(address)
        (internal if domain and inbox_selectors.hosted_domain(domain) else external).append(address)
    return internal, external


def deliver_internal(raw: bytes, *, mail_from: str, recipients: list[str]) -> list[str]:
    """Through the receive pipeline; returns the refusals as text."""
    refused = []
    for delivery in pipeline.receive(raw, mail_from=mail_from, rcpt_tos=recipients):
        if delivery.refusal is not None:
            refused.append(f"{delivery.recipient}: {delivery.refusal.smtp_reply}")
    return refused


def _classify(exc: Exception) -> Failure:
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        codes = [code for code, _ in exc.recipients.values()]
        text = "; ".join(f"{rcpt}: {code} {msg!r}" for rcpt, (code, msg) in exc.recipients.items())
        return Failure(f"recipients refused: {text}"[:1000], all(c >= 500 for c in codes))
    code = getattr(exc, "smtp_code", None)
    if isinstance(code, int):
        detail = getattr(exc, "smtp_error", b"")
        detail = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
        return Failure(f"relay answered {code} {detail}"[:1000], code >= 500)
    error_code = (
        getattr(exc, "response", {}).get("Error", {}).get("Code", "")
        if hasattr(exc, "response")
        else ""
    )
    if error_code:
        permanent = error_code in {
            "MessageRejected",
            "MailFromDomainNotVerified",
            "InvalidParameterValue",
        }
        return Failure(f"SES: {error_code}: {exc}"[:1000], permanent)
    return Failure(f"{type(exc).__name__}: {exc}"[:1000], False)


def deliver_external(raw: bytes, *, mail_from: str, recipients: list[str]) -> None:
    """Through the configured backend; raises :class:`Failure`."""
    try:
        connection = get_connection(fail_silently=False)
        sent = connection.send_messages([RawEmail(raw, mail_from, recipients)])
    except Exception as exc:
        raise _classify(exc) from exc
    if not sent:
        raise Failure("the email backend sent nothing", permanent=False)
