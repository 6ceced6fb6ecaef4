"""Handing a sent item to its recipients: hosted addresses through the receive pipeline, the
rest through Django's email backend (``EMAIL_URL``'s SMTP relay, or Amazon SES via django-ses).
Failures are sorted into permanent (a 5xx, a rejected message) and transient (everything else).

The caller learns when the message itself starts to go out (``on_handover``: for SMTP just
before ``DATA``) and when the relay accepted it (``on_accepted``: right after the ``250``, before
``QUIT``), so that a worker killed mid-conversation leaves a record that says whether the relay
may have the message.
"""

from __future__ import annotations

import contextlib
import smtplib
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.mail import EmailMessage, get_connection
from django.core.mail.backends.smtp import EmailBackend as SmtpBackend

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
    for receipt in pipeline.receive(raw, mail_from=mail_from, rcpt_tos=recipients):
        if receipt.refusal is not None:
            refused.append(f"{receipt.recipient}: {receipt.refusal.smtp_reply}")
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


SMTP_BACKEND = "django.core.mail.backends.smtp.EmailBackend"


class HandoverSmtpBackend(SmtpBackend):
    """Django's SMTP backend, calling ``on_handover`` just before each ``DATA`` command (after
    the relay accepted sender and recipients, before any byte of the message goes out), and
    keeping what Django's backend drops: the relay's reply to ``DATA`` and the recipients it
    refused while accepting others."""

    on_handover: Callable[[], None] = staticmethod(lambda: None)
    reply: str = ""
    refused: dict[str, tuple[int, bytes]]

    def open(self) -> bool | None:
        created = super().open()
        self.refused = {}
        if created and self.connection is not None:
            data, sendmail = self.connection.data, self.connection.sendmail

            def announced_data(msg: bytes) -> tuple[int, bytes]:
                self.on_handover()
                code, text = data(msg)
                self.reply = f"{code} {_text(text)}"
                return code, text

            def noted_sendmail(*args: Any, **kwargs: Any) -> dict[str, tuple[int, bytes]]:
                self.refused = sendmail(*args, **kwargs)
                return self.refused

            self.connection.data = announced_data
            self.connection.sendmail = noted_sendmail
        return created


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def accepted_reply(connection: Any) -> str:
    """What the relay answered to the message, with the recipients it refused, if any."""
    if not isinstance(connection, HandoverSmtpBackend):
        return f"accepted by {type(connection).__module__}.{type(connection).__name__}"
    reply = connection.reply or "accepted"
    refused = getattr(connection, "refused", {}) or {}
    if refused:
        reply += "; refused: " + "; ".join(
            f"{rcpt}: {code} {_text(msg)}" for rcpt, (code, msg) in refused.items()
        )
    return reply[:1000]


def capturing() -> bool:
    """Whether mail for other domains is kept here instead of sent (``OUTBOX_CAPTURE``)."""
    return bool(settings.OUTBOX_CAPTURE)


def _nothing() -> None:
    return None


def _watchdog(connection: Any) -> threading.Timer:
    """Ends an SMTP conversation that would outlive the attempt's lease.

    ``EMAIL_TIMEOUT`` bounds each socket operation, not the conversation: a relay that answers
    slowly could keep an attempt busy past ``OUTBOX_LEASE_SECONDS``, when another worker may take
    the item and send it at the same time. Ten seconds before the lease ends the socket is shut
    down; the blocked call fails and the attempt is recorded as a transient failure.
    """

    def abort() -> None:
        sock = getattr(getattr(connection, "connection", None), "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(max(1.0, settings.OUTBOX_LEASE_SECONDS - 10.0), abort)
    timer.daemon = True
    return timer


def deliver_external(
    raw: bytes,
    *,
    mail_from: str,
    recipients: list[str],
    on_handover: Callable[[], None] = _nothing,
    on_accepted: Callable[[str], None] = lambda reply: None,
) -> None:
    """Through the configured backend; raises :class:`Failure`.

    ``on_handover`` runs just before the message goes out (SMTP: before ``DATA``; other backends:
    before the call); an exception from it aborts the attempt unsent. ``on_accepted`` runs with
    the relay's reply as soon as the backend accepted the message, before the connection is
    closed; its exceptions propagate unchanged (the message is out: the caller must not record a
    failure).
    """
    smtp = settings.EMAIL_BACKEND == SMTP_BACKEND
    watchdog: threading.Timer | None = None
    try:
        connection = get_connection(
            backend=f"{__name__}.HandoverSmtpBackend" if smtp else None, fail_silently=False
        )
        if smtp:
            connection.on_handover = on_handover
        watchdog = _watchdog(connection)
        watchdog.start()
        connection.open()  # opened here, so send_messages leaves it open until we recorded
    except Exception as exc:
        if watchdog is not None:
            watchdog.cancel()
        raise _classify(exc) from exc
    try:
        try:
            if not smtp:
                on_handover()
            sent = connection.send_messages([RawEmail(raw, mail_from, recipients)])
        except Exception as exc:
            raise _classify(exc) from exc
        if not sent:
            raise Failure("the email backend sent nothing", permanent=False)
        on_accepted(accepted_reply(connection))
    finally:
        watchdog.cancel()
        with contextlib.suppress(Exception):
            connection.close()
