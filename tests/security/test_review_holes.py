"""Holes between the day's features found in review: each test is the reproduction."""

from __future__ import annotations

import pytest

from apikeys.models import Workspace
from inboxes import services as inbox_services
from inboxes.models import Inbox
from mail import pipeline
from tests.conftest import Api, error_of
from tests.mail.messages import message

pytestmark = pytest.mark.django_db


@pytest.fixture
def inbox(workspace: Workspace) -> Inbox:
    return inbox_services.inbox_create(workspace=workspace, local_part="box")


@pytest.mark.parametrize(
    "q",
    [
        "before:0001-01-01T00:00:00+01:00",
        "after:9999-12-31T23:59:59-01:00",
        "before:0001-01-01T00:30:00+05:00",
    ],
)
def test_q_date_out_of_range_in_utc_is_a_400_not_a_500(api: Api, inbox: Inbox, q: str) -> None:
    pipeline.receive_one(message(to=inbox.address), to=inbox.address)
    response = api.get("/api/v1/emails", {"q": q})
    assert error_of(response) == (400, "validation_error"), response.content
