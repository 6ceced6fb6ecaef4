"""The HTTP layer under daphne hands every body to the application: a POST whose Content-Type
claims multipart but whose body is not got a bare, headerless 400 from Twisted (found by the
schema fuzzer's envelope check); it now gets the API's 415 in the envelope."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from tests.live import Stack


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"]).start()
    yield running
    running.stop()


@pytest.mark.parametrize(
    "content_type",
    [
        "multipart/form-data",
        "multipart/form-data; boundary=x",
        "application/x-www-form-urlencoded",
    ],
)
def test_form_bodies_reach_the_api(
    stack: Stack, transactional_db: None, workspace: Workspace, content_type: str
) -> None:
    key = key_services.api_key_create(
        workspace=workspace, name="k", scopes=["admin"], by=Actor.system("tests")
    ).plain
    response = httpx.post(
        f"{stack.base_url}/api/v1/keys",
        content=b'{"name": "x"}',
        headers={"Authorization": f"Bearer {key}", "Content-Type": content_type},
        timeout=10,
    )
    assert response.status_code == 415, (response.status_code, response.content)
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["code"] == "unsupported_media_type"
