"""The Python client (clients/python, issue 27) against live servers: its package is put on
``sys.path`` here (it is a separate distribution, not installed into the project's venv), and
a module's tests share one :class:`~tests.live.Stack`."""

from __future__ import annotations

import os
import smtplib
import sys
from collections.abc import Iterator
from email.message import EmailMessage
from typing import Any

import pytest

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from tests.live import ROOT, Stack

CLIENT_ROOT = ROOT / "clients" / "python"
if str(CLIENT_ROOT) not in sys.path:
    sys.path.insert(0, str(CLIENT_ROOT))

from pigeonhole_client import Pigeonhole  # noqa: E402

ALL_SCOPES = ("read", "write", "send", "admin")


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker: Any) -> Iterator[Stack]:
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"]).start()
    yield running
    running.stop()


@pytest.fixture
def api_key(transactional_db: None, workspace: Workspace) -> str:
    return key_services.api_key_create(
        workspace=workspace, name="client", scopes=ALL_SCOPES, by=Actor.system("tests")
    ).plain


@pytest.fixture
def ph(stack: Stack, api_key: str) -> Iterator[Pigeonhole]:
    with Pigeonhole(stack.base_url, api_key) as client:
        yield client


def send_mail(
    stack: Stack,
    to: str,
    subject: str,
    text: str = "Hello.\n",
    *,
    sender: str = "Shop <noreply@shop.example>",
    attachment: tuple[str, bytes] | None = None,
) -> None:
    """One message to ``to`` through the stack's SMTP front door (smtplib, real SMTP)."""
    message = EmailMessage()
    message["From"] = sender
    message["To"] = to
    message["Subject"] = subject
    message.set_content(text)
    if attachment:
        message.add_attachment(
            attachment[1], maintype="text", subtype="plain", filename=attachment[0]
        )
    with smtplib.SMTP("127.0.0.1", stack.smtp_port, timeout=30) as smtp:
        smtp.send_message(message)


def client_env(stack: Stack, key: str, **extra: str) -> dict[str, str]:
    """The environment of a process using the client (the CLI, the example's pytest run)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "PYTEST_")) and k not in {"DATABASE_URL", "REDIS_URL"}
    }
    env["PYTHONPATH"] = str(CLIENT_ROOT)
    env["PIGEONHOLE_URL"] = stack.base_url
    env["PIGEONHOLE_API_KEY"] = key
    env.update(extra)
    return env
