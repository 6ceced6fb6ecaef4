"""An unknown query parameter is a 400 ``validation_error`` naming it, on every operation
(issue 25, item 8): ``GET /emails?inbox_id=…`` answered with every inbox's mail, because the
filter is called ``inbox`` and the unknown name was ignored. Against a live server (daphne, or
``manage.py serve`` in embedded mode): every operation of the OpenAPI document, the two raw ASGI
endpoints (wait, stream) and the outbox wait wrapper included, is asked with a parameter it does
not take; the documented parameters keep working.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from inboxes.models import Inbox
from tests.live import Stack, signed_in

PASSWORD = "unknown-query-password-7"
OWNER = "owner@unknown-query.test"


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker: Any) -> Iterator[Stack]:
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"]).start()
    yield running
    running.stop()


@pytest.fixture
def client(stack: Stack, transactional_db: None, workspace: Workspace) -> Iterator[httpx.Client]:
    key = key_services.api_key_create(
        workspace=workspace, name="k", scopes=["admin"], by=Actor.system("tests")
    ).plain
    with stack.client(key) as client:
        yield client


@pytest.fixture
def owner_session(stack: Stack, workspace: Workspace) -> Iterator[httpx.Client]:
    """The workspace owner's dashboard session (the decision operation takes no key)."""
    user = key_services.user_get_or_create(email=OWNER, password=PASSWORD)
    key_services.membership_set(
        workspace=workspace, user=user, role="owner", by=Actor.system("tests")
    )
    with signed_in(stack.base_url, OWNER, PASSWORD) as session:
        yield session


def operations(stack: Stack) -> list[tuple[str, str, str]]:
    """(method, path, operationId) of every operation the live server documents."""
    document = httpx.get(stack.base_url + "/api/openapi.json").raise_for_status().json()
    return [
        (method.upper(), path, operation["operationId"])
        for path, item in document["paths"].items()
        for method, operation in item.items()
    ]


def assert_names(response: httpx.Response, *names: str) -> None:
    assert response.status_code == 400, (response.status_code, response.text[:300])
    error = response.json()["error"]
    assert error["code"] == "validation_error", error
    assert sorted(issue["path"] for issue in error["issues"]) == sorted(names), error
    for issue in error["issues"]:
        assert issue["message"].startswith("Unknown query parameter"), issue


def test_every_operation_refuses_an_unknown_parameter(
    stack: Stack, client: httpx.Client, owner_session: httpx.Client, workspace: Workspace
) -> None:
    inbox = client.post("inboxes", json={}).json()
    asked = []
    for method, path, operation_id in operations(stack):
        url = path.replace("{inbox_id}", inbox["id"])
        for name in (
            "email_id",
            "attachment_id",
            "key_id",
            "key",
            "item_id",
            "endpoint_id",
            "credential_id",
            "example_id",
        ):
            url = url.replace("{" + name + "}", "nothing")
        url = url.replace("{delivery_id}", "nothing").replace("{domain}", "nothing.test")
        assert "{" not in url, url
        body = {} if method in ("POST", "PATCH") else None
        if operation_id == "decideOutboxItem":  # only an owner's or admin's session decides
            response = owner_session.request(method, url + "?nonsense=1", json=body)
        else:
            response = client.request(
                method, url.removeprefix("/api/v1") + "?nonsense=1", json=body
            )
        assert_names(response, "nonsense")
        asked.append(operation_id)
    # The raw ASGI endpoints are in the document, so they were asked too.
    assert {"waitForEmail", "streamInbox", "listEmails", "deleteInbox"} <= set(asked)
    assert Inbox.objects.filter(pk=inbox["id"]).exists()  # DELETE with a typo deleted nothing


def test_a_misspelt_filter_never_widens_a_list(client: httpx.Client) -> None:
    alpha = client.post("inboxes", json={"local_part": "alpha"}).json()
    assert_names(client.get("emails", params={"inbox_id": alpha["id"]}), "inbox_id")
    assert_names(client.get("emails", params={"inbox_id": "nonsense"}), "inbox_id")
    assert_names(client.get("emails", params={"lable": "x", "unred": "true"}), "lable", "unred")
    # DRF's renderer switch is no parameter here either: the answer is always JSON.
    assert_names(client.get("inboxes", params={"format": "json"}), "format")
    # Paging parameters belong to lists only.
    assert_names(client.get(f"inboxes/{alpha['id']}", params={"limit": "5"}), "limit")
    # The documented names keep working.
    listed = client.get("emails", params={"inbox": alpha["id"], "limit": "5", "cursor": ""})
    assert listed.status_code == 200, listed.text
    assert client.get(f"inboxes/{alpha['id']}/wait", params={"timeout": "0"}).status_code == 204


def test_the_message_names_what_the_operation_takes(client: httpx.Client) -> None:
    response = client.get("labels", params={"q": "x"})
    assert_names(response, "q")
    message = response.json()["error"]["issues"][0]["message"]
    assert message == "Unknown query parameter: this operation takes cursor, limit."
    response = client.get("me", params={"verbose": "1"})
    assert_names(response, "verbose")
    message = response.json()["error"]["issues"][0]["message"]
    assert message == "Unknown query parameter: this operation takes none."


def test_the_outbox_wait_wrapper_refuses_an_unknown_parameter(client: httpx.Client) -> None:
    # ``wait`` makes the ASGI wrapper take a slot and run the view: the view refuses the typo
    # before anything is sent.
    inbox = client.post("inboxes", json={}).json()
    response = client.post(
        f"inboxes/{inbox['id']}/send",
        params={"wait": "5", "approve": "true"},
        json={"to": ["x@example.com"], "subject": "s", "text": "t"},
    )
    assert_names(response, "approve")
    assert client.get("outbox").json()["data"] == []
