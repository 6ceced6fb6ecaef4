"""A request body over the instance's limit answers 413 payload_too_large in the envelope (found
by the schema fuzzer: a 6 MB send body raised RequestDataTooBig, a 500), and the largest body
the document allows (send text and html at their maximum lengths) fits under the limit."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings

from tests.conftest import Api, error_of

pytestmark = pytest.mark.django_db


def test_a_body_over_the_limit_is_413(api: Api) -> None:
    inbox = api.call("POST", "inboxes", {"local_part": "big"}).json()
    body = json.dumps({"to": ["a@example.org"], "subject": "s", "text": "x" * 5000})
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=4096):
        response = api.post(
            f"/api/v1/inboxes/{inbox['id']}/send", body, content_type="application/json"
        )
    assert error_of(response) == (413, "payload_too_large")
    assert "4096 bytes" in response.json()["error"]["message"]


def test_the_largest_documented_send_fits(api: Api, settings) -> None:  # type: ignore[no-untyped-def]
    worst = json.dumps(
        {
            "to": ["a@example.org"],
            "subject": "s",
            "text": "\x84" * 1_000_000,
            "html": "\x84" * 2_000_000,
        }
    )
    assert len(worst.encode()) <= settings.DATA_UPLOAD_MAX_MEMORY_SIZE
