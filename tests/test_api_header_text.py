"""Text that becomes a mail header is one line (found by the schema fuzzer: a subject holding
U+001C passed validation, then the email package refused the header and send answered 500)."""

from __future__ import annotations

import pytest

from inboxes.models import Inbox
from outbox import mime
from outbox.models import OutboxItem
from tests.conftest import Api, error_of

pytestmark = pytest.mark.django_db

BREAKS = ["a\nb", "a\rb", "a\x1cb", "a\x85b", "a\u2028b", "a\x00b", "a\x7fb"]


@pytest.mark.parametrize("subject", BREAKS)
def test_send_refuses_a_subject_that_is_not_one_line(api: Api, subject: str) -> None:
    inbox = api.call("POST", "inboxes", {"local_part": "out"}).json()
    body = {"to": ["someone@example.org"], "subject": subject, "text": "hi"}
    response = api.call("POST", f"inboxes/{inbox['id']}/send", body)
    assert error_of(response) == (400, "validation_error")
    assert [i["path"] for i in response.json()["error"]["issues"]] == ["subject"]
    assert not OutboxItem.objects.exists()


@pytest.mark.parametrize("name", BREAKS)
def test_inbox_name_is_one_line(api: Api, name: str) -> None:
    response = api.call("POST", "inboxes", {"local_part": "named", "name": name})
    assert error_of(response) == (400, "validation_error")
    assert not Inbox.objects.filter(local_part="named").exists()


def test_tabs_and_unicode_are_fine(api: Api) -> None:
    inbox = api.call("POST", "inboxes", {"local_part": "fine", "name": "Zoë\tBot"}).json()
    body = {"to": ["someone@example.org"], "subject": "Grüße\t✓ 验证码", "text": "hi"}
    response = api.call("POST", f"inboxes/{inbox['id']}/send", body)
    assert response.status_code == 200, response.content


def test_a_stored_name_with_line_breaks_still_builds() -> None:
    raw = mime.build(
        from_address="a@example.org",
        from_name="Old\nname",
        to=["b@example.org"],
        cc=[],
        subject="s",
        text="t",
        html="",
        message_id="m@example.org",
    )
    assert b"From: Old name <a@example.org>" in raw
