"""A list filtered by ``q`` stops after ``SEARCH_TIMEOUT_MS`` (mail.selectors.search_time_limit):
up to twenty unindexed terms (``header:``, negations) read every email of a workspace, so one
request could hold a database connection for as long as it liked. The REST list and the
dashboard's search box here; MCP ``search_emails`` in tests/outbox/mcp/test_search_limit.py."""

from __future__ import annotations

from copy import copy as copy_of

import pytest
from django.test import Client
from django.test.utils import override_settings

from apikeys.models import Workspace
from inboxes import services as inbox_services
from inboxes.models import Inbox
from mail import pipeline
from mail.models import Email
from mail.query import MAX_TERMS
from tests.conftest import Api, error_of
from tests.factories import MembershipFactory
from tests.mail.messages import message

pytestmark = pytest.mark.django_db

COPIES = 1500
# Terms the index cannot serve, as many as q's 200 characters hold, that no email matches: the
# search reads every email's headers (a negated term matches them all, and a page of five is
# found in the first rows).
HEAVY = " ".join(f"header:A{n}" for n in range(MAX_TERMS))[:200].rsplit(" ", 1)[0]


@pytest.fixture
def inbox(workspace: Workspace) -> Inbox:
    """An inbox holding COPIES + 1 emails with a dozen headers each."""
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="big")
    headers = {f"X-Trace-{n}": f"value {n}" for n in range(12)}
    raw = message(to=inbox.address, subject="Bulk", text="Hello there.", headers=headers)
    delivery = pipeline.receive_one(raw, to=inbox.address)
    original = Email.objects.get(pk=delivery.email_id)
    copies = []
    for _ in range(COPIES):
        copy = copy_of(original)
        copy.pk = Email._meta.pk.get_default()
        copy.message_id = ""
        copies.append(copy)
    Email.objects.bulk_create(copies, batch_size=500)
    return inbox


@pytest.mark.parametrize("path", ["emails", "inboxes/{inbox}/emails"])
def test_a_search_past_its_time_is_a_400_on_q_and_the_next_one_works(
    api: Api, inbox: Inbox, path: str
) -> None:
    url = path.format(inbox=inbox.pk)
    with override_settings(SEARCH_TIMEOUT_MS=1):
        response = api.call("GET", url, {"q": HEAVY, "limit": 5})
        assert response.status_code == 400, response.json()
        assert error_of(response) == (400, "validation_error")
        (issue,) = response.json()["error"]["issues"]
        assert issue["path"] == "q" and "longer than 1 ms" in issue["message"]
        # A list without q has no limit, on the same connection.
        assert api.call("GET", url, {"limit": 5}).status_code == 200
    # The limit was the setting's: the same search with the default's time answers (nothing).
    response = api.call("GET", url, {"q": HEAVY, "limit": 5})
    assert response.status_code == 200, response.json()
    assert response.json()["data"] == []
    response = api.call("GET", url, {"q": "header:X-Trace-3", "limit": 5})
    assert len(response.json()["data"]) == 5
    assert Email.objects.filter(inbox=inbox).count() == COPIES + 1  # nothing lost


def test_the_dashboard_search_box_says_the_search_ran_out_of_time(
    client: Client, workspace: Workspace, inbox: Inbox
) -> None:
    client.force_login(MembershipFactory(workspace=workspace, role="member").user)
    with override_settings(SEARCH_TIMEOUT_MS=1):
        response = client.get(f"/inboxes/{inbox.pk}/", {"q": HEAVY})
    assert response.status_code == 200
    page = response.content.decode()
    assert "longer than 1 ms and was stopped" in page
    response = client.get(f"/inboxes/{inbox.pk}/", {"q": "header:X-Trace-3"})
    page = response.content.decode()
    assert "was stopped" not in page
    ids = set(Email.objects.filter(inbox=inbox).values_list("pk", flat=True))
    assert sum(1 for pk in ids if pk in page) >= 5  # the first page of the inbox's mail


def test_the_dashboard_says_a_search_too_long_for_the_box_and_lists_nothing(
    client: Client, workspace: Workspace, inbox: Inbox
) -> None:
    """Over 200 characters the box's form is invalid: it said nothing and listed all the mail."""
    client.force_login(MembershipFactory(workspace=workspace, role="member").user)
    page = client.get(f"/inboxes/{inbox.pk}/", {"q": "x" * 201}).content.decode()
    assert "at most 200 characters" in page
    assert not any(
        pk in page for pk in Email.objects.filter(inbox=inbox).values_list("pk", flat=True)
    )
