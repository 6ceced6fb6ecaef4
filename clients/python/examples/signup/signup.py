"""A tiny app with a sign-up flow: ``sign_up(address)`` mails a six-digit code over SMTP and
``confirm(address, code)`` checks it. Its SMTP server is ``SIGNUP_SMTP_HOST`` /
``SIGNUP_SMTP_PORT`` (in its tests: Pigeonhole's SMTP port, so the mail lands in an inbox)."""

from __future__ import annotations

import os
import secrets
import smtplib
from email.message import EmailMessage

SENDER = "Example App <noreply@signup.example>"
_codes: dict[str, str] = {}


def sign_up(address: str) -> None:
    """Starts a sign-up: remembers a fresh code for ``address`` and mails it there."""
    code = f"{secrets.randbelow(900_000) + 100_000}"
    _codes[address] = code
    message = EmailMessage()
    message["From"] = SENDER
    message["To"] = address
    message["Subject"] = "Your sign-up code"
    message.set_content(f"Welcome!\n\nYour verification code is {code}.\n")
    host = os.environ.get("SIGNUP_SMTP_HOST", "127.0.0.1")
    port = int(os.environ.get("SIGNUP_SMTP_PORT", "2525"))
    with smtplib.SMTP(host, port, timeout=30) as smtp:
        smtp.send_message(message)


def confirm(address: str, code: str) -> bool:
    """True when ``code`` is the one mailed to ``address``."""
    return bool(code) and _codes.get(address) == code
