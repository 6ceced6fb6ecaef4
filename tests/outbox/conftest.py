"""Fixtures of the outbox tests: a real SMTP sink on 127.0.0.1 standing in for the relay."""

from __future__ import annotations

import email
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import policy

import pytest
from aiosmtpd.controller import Controller

from tests.live import free_port


@dataclass
class Sink:
    port: int = 0
    answers: list[str] = field(default_factory=list)  # replies to DATA, in order; then 250
    received: list[tuple[str, list[str], bytes]] = field(default_factory=list)

    async def handle_DATA(self, server, session, envelope) -> str:  # type: ignore[no-untyped-def]
        answer = self.answers.pop(0) if self.answers else "250 OK"
        if answer.startswith("2"):  # accepted: the message is the sink's
            self.received.append(
                (envelope.mail_from, list(envelope.rcpt_tos), envelope.original_content)
            )
        return answer

    def messages(self) -> list[email.message.EmailMessage]:
        return [email.message_from_bytes(raw, policy=policy.default) for _, _, raw in self.received]


@pytest.fixture
def sink(settings) -> Iterator[Sink]:  # type: ignore[no-untyped-def]
    state = Sink(port=free_port())
    controller = Controller(state, hostname="127.0.0.1", port=state.port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", state.port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    settings.OUTBOX_CAPTURE = False  # a relay is configured: embedded mode sends too
    yield state
    controller.stop()
