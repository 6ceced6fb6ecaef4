"""MCP ``search_emails`` goes through the same time limit as the REST list
(mail.selectors.search_time_limit): a stack started with ``SEARCH_TIMEOUT_MS=1`` answers a search
that reads every email's headers with the API's validation_error on ``q``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from copy import copy as copy_of

import pytest

from apikeys.models import Workspace
from inboxes import services as inbox_services
from mail import pipeline
from mail.models import Email
from tests.live import Stack
from tests.mail.messages import message
from tests.mail.test_search_time_limit import HEAVY
from tests.outbox.mcp.conftest import error_of, session
from tests.outbox.mcp.test_http import key_of, mcp_url


@pytest.fixture(scope="module")
def impatient_stack(django_db_setup: None, django_db_blocker) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    from django.db import connection

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SEARCH_TIMEOUT_MS", "1")
        running = Stack(connection.settings_dict["NAME"])
    running.start()
    yield running
    running.stop()


def test_search_emails_past_its_time_is_the_apis_validation_error(
    impatient_stack: Stack, transactional_db: None, workspace: Workspace
) -> None:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="big")
    headers = {f"X-Trace-{n}": f"value {n}" for n in range(12)}
    delivery = pipeline.receive_one(
        message(to=inbox.address, subject="Bulk", headers=headers), to=inbox.address
    )
    original = Email.objects.get(pk=delivery.email_id)
    copies = []
    for _ in range(1500):
        copy = copy_of(original)
        copy.pk = Email._meta.pk.get_default()
        copies.append(copy)
    Email.objects.bulk_create(copies, batch_size=500)
    key = key_of(workspace, "read")

    async def run() -> list:
        async with session(mcp_url(impatient_stack), key) as client:
            return [
                await client.call_tool("search_emails", {"q": HEAVY, "limit": 5}),
                await client.call_tool("search_emails", {"limit": 5}),
            ]

    stopped, unfiltered = asyncio.run(run())
    error = error_of(stopped)
    assert error["code"] == "validation_error"
    assert "longer than 1 ms" in str(error)
    assert not unfiltered.is_error and len(unfiltered.structured_content["emails"]) == 5
