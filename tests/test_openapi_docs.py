"""The OpenAPI document reads as documentation for a client author (issue 25, item 11): every
operation and webhook has a summary and a description of its own, no maintainer's docstring
reaches the document (twelve request bodies once read "Base of request-body serializers: JSON
types are checked strictly (see module doc)"), every id prefix the API answers with is listed,
and the ``webhooks`` section covers every event type. The payloads themselves are checked
against it in tests/webhooks/test_openapi_webhooks.py.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest
from rest_framework import serializers
from rest_framework.views import APIView

from config.api.ids import PREFIXES
from tests.conftest import Api
from webhooks.services import TEST_EVENT, WEBHOOK_EVENTS

pytestmark = pytest.mark.django_db

OUR_APPS = ("config", "apikeys", "inboxes", "labels", "mail", "outbox", "webhooks", "events")
SCOPE_LINE = "Required scope:"


@pytest.fixture(scope="module")
def document(django_db_blocker: Any) -> dict:
    with django_db_blocker.unblock():
        response = Api().get("/api/openapi.json")
    assert response.status_code == 200
    return response.json()


def operations(document: dict) -> Iterator[tuple[str, dict]]:
    for section in ("paths", "webhooks"):
        for name, item in document.get(section, {}).items():
            for method, operation in item.items():
                yield f"{method.upper()} {name}", operation


def descriptions(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "description" and isinstance(value, str):
                yield value
            else:
                yield from descriptions(value)
    elif isinstance(node, list):
        for value in node:
            yield from descriptions(value)


def our_classes(base: type) -> Iterator[type]:
    seen: set[type] = set()
    todo = [base]
    while todo:
        for cls in todo.pop().__subclasses__():
            if cls not in seen:
                seen.add(cls)
                todo.append(cls)
                if cls.__module__.split(".")[0] in OUR_APPS:
                    yield cls


def test_every_operation_has_a_summary_and_a_description(document: dict) -> None:
    found = list(operations(document))
    assert len(found) > 40
    for name, operation in found:
        assert operation.get("summary", "").strip(), name
        own = operation.get("description", "").split(SCOPE_LINE)[0].strip()
        assert len(own) > 20, (name, operation.get("description"))


def test_no_docstring_reaches_the_document(document: dict) -> None:
    texts = list(descriptions(document))
    assert not [text for text in texts if "module doc" in text or "Base of request" in text]
    classes = [*our_classes(serializers.Serializer), *our_classes(APIView)]
    assert len(classes) > 30
    for cls in classes:
        if not cls.__dict__.get("__doc__"):
            continue
        first_line = inspect.cleandoc(cls.__doc__).splitlines()[0]
        leaked = [text for text in texts if first_line in text]
        assert not leaked, (cls, first_line)


def test_every_id_prefix_the_api_answers_with_is_documented(document: dict) -> None:
    text = document["info"]["description"]
    # dom_ and evt_ ids stay inside: domains are named by their name, stream events carry numbers.
    for prefix in PREFIXES - {"dom", "evt"}:
        assert f"`{prefix}_`" in text, prefix


def test_the_webhooks_section_covers_every_event(document: dict) -> None:
    assert set(document["webhooks"]) == {*WEBHOOK_EVENTS, TEST_EVENT}
    for event, item in document["webhooks"].items():
        operation = item["post"]
        headers = {p["name"] for p in operation["parameters"] if p["in"] == "header"}
        assert headers == {"Service-Event", "Service-Delivery", "Service-Signature"}, event
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        name = body["$ref"].rsplit("/", 1)[1]
        assert document["components"]["schemas"][name]["properties"]["type"]["const"] == event
