"""The django-ses path against a local SES-compatible endpoint (moto in server mode)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import boto3
import httpx
import pytest

from apikeys.models import Workspace
from inboxes import services as inbox_services
from outbox.models import OutboxItem
from tests.conftest import Api
from tests.live import ROOT, Process, free_port

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def ses(settings) -> Iterator[str]:  # type: ignore[no-untyped-def]
    port = free_port()
    server = Process(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        port,
        {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    server.start()
    url = f"http://127.0.0.1:{port}"
    settings.EMAIL_BACKEND = "django_ses.SESBackend"
    settings.OUTBOX_CAPTURE = False
    settings.AWS_SES_REGION_NAME = "us-east-1"
    settings.AWS_SES_REGION_ENDPOINT_URL = url
    settings.AWS_ACCESS_KEY_ID = settings.AWS_SECRET_ACCESS_KEY = "testing"
    yield url
    server.stop()


def test_sending_through_ses(ses: str, api: Api, workspace: Workspace) -> None:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="ses")
    client = boto3.client(
        "ses",
        region_name="us-east-1",
        endpoint_url=ses,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    client.verify_email_identity(EmailAddress=inbox.address)
    response = api.call(
        "POST",
        f"inboxes/{inbox.pk}/send",
        {"to": ["customer@example.com"], "subject": "Via SES", "text": "Hello from SES"},
    )
    assert response.status_code == 200 and response.json()["status"] == "sent"
    item = OutboxItem.objects.get()
    assert item.delivery == "done", item.error
    assert item.relay_reply.startswith("accepted by django_ses")
    sent = httpx.get(f"{ses}/moto-api/data.json").json()["ses"]["RawMessage"]
    assert len(sent) == 1  # one raw message (moto lists a recipient once per place it is named)
    assert set(sent[0]["destinations"]) == {"customer@example.com"}
    assert f"From: {inbox.address}" in sent[0]["raw_data"]
    assert "Subject: Via SES" in sent[0]["raw_data"]


def test_ses_rejection_is_permanent(ses: str, api: Api, workspace: Workspace) -> None:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="unverified")
    api.call(
        "POST",
        f"inboxes/{inbox.pk}/send",
        {"to": ["customer@example.com"], "subject": "s", "text": "t"},
    )
    item = OutboxItem.objects.get()
    assert item.status == "failed" and "MessageRejected" in item.error
