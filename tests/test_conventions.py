"""The API's shared conventions: the envelope for every error, cursors, limits, rate limits."""

from __future__ import annotations

import pytest
from django.test import RequestFactory
from rest_framework import serializers

from apikeys.models import Workspace
from config.api import errors
from config.api.ids import looks_like, new_id
from tests.conftest import Api, error_of

pytestmark = pytest.mark.django_db


def test_unknown_api_path_is_enveloped_404(api: Api) -> None:
    assert error_of(api.get("/api/v1/no/such/thing")) == (404, "not_found")


def test_wrong_method_is_enveloped_405(api: Api) -> None:
    assert error_of(api.call("PUT", "me", {})) == (405, "method_not_allowed")
    assert error_of(api.call("DELETE", "keys")) == (405, "method_not_allowed")


def test_unsupported_media_type_is_enveloped_415(api: Api) -> None:
    response = api.post("/api/v1/keys", "name=x", content_type="application/x-www-form-urlencoded")
    assert error_of(response) == (415, "unsupported_media_type")


@pytest.mark.parametrize("body", ['{"name": ', "{'name': 'x'}", "\xff\xfe", "[1,"])
def test_invalid_json(api: Api, body: str) -> None:
    response = api.post("/api/v1/keys", body, content_type="application/json")
    assert error_of(response) == (400, "invalid_json")


def test_non_object_json_is_a_validation_error(api: Api) -> None:
    response = api.post("/api/v1/keys", "[1, 2]", content_type="application/json")
    assert error_of(response) == (400, "validation_error")


class _Condition(serializers.Serializer):
    field = serializers.ChoiceField(choices=["from", "subject"])
    op = serializers.ChoiceField(choices=["contains", "regex"])


class _Rules(serializers.Serializer):
    match = serializers.ChoiceField(choices=["any", "all"])
    conditions = _Condition(many=True)


class _Label(serializers.Serializer):
    key = serializers.CharField()
    rules = _Rules()


def test_nested_and_list_paths_are_dotted() -> None:
    serializer = _Label(
        data={
            "rules": {
                "match": "some",
                "conditions": [{"field": "from", "op": "contains"}, {"field": "to", "op": "x"}],
            }
        }
    )
    assert not serializer.is_valid()
    error = errors.to_api_error(serializers.ValidationError(serializer.errors))
    assert error is not None and error.code == "validation_error" and error.status == 400
    paths = sorted(issue["path"] for issue in error.issues or [])
    assert paths == ["key", "rules.conditions.1.field", "rules.conditions.1.op", "rules.match"]


def test_unexpected_exception_is_enveloped_500() -> None:
    response = errors.exception_handler(RuntimeError("boom"), {})
    assert response.status_code == 500
    assert response.data["error"]["code"] == "internal_error"
    assert "boom" not in str(response.data)


def test_django_500_handler_envelopes_api_paths_only() -> None:
    factory = RequestFactory()
    api_response = errors.handler500(factory.get("/api/v1/me"))
    assert api_response.status_code == 500 and b'"internal_error"' in api_response.content
    html_response = errors.handler500(factory.get("/dashboard"))
    assert html_response.status_code == 500 and b"internal_error" not in html_response.content


def test_cursor_pagination_walks_every_item_once(api: Api) -> None:
    created = {api.call("POST", "keys", {"name": f"k{i}"}).json()["id"] for i in range(5)}
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        query = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = api.call("GET", "keys", query).json()
        assert set(page) == {"data", "next_cursor"}
        assert len(page["data"]) <= 2
        seen += [k["id"] for k in page["data"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 6  # five plus the fixture's key
    assert created <= set(seen)
    assert seen == sorted(seen, reverse=True)  # newest first


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ({"limit": 201}, "limit"),
        ({"limit": 0}, "limit"),
        ({"limit": -1}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"cursor": "garbage!"}, "cursor"),
        ({"cursor": "YWJj"}, "cursor"),
    ],
)
def test_bad_list_parameters_are_validation_errors(api: Api, query: dict, path: str) -> None:
    response = api.call("GET", "keys", query)
    assert error_of(response) == (400, "validation_error")
    assert [i["path"] for i in response.json()["error"]["issues"]] == [path]


def test_limit_at_maximum_is_accepted(api: Api) -> None:
    assert api.call("GET", "keys", {"limit": 200}).status_code == 200


def test_rate_limit_per_key(settings, workspace: Workspace, make_key) -> None:  # type: ignore[no-untyped-def]
    settings.RATE_LIMIT_PER_MINUTE = 3
    client, bystander = Api(make_key(workspace)), Api(make_key(workspace))
    assert [client.call("GET", "me").status_code for _ in range(3)] == [200, 200, 200]
    limited = client.call("GET", "me")
    assert error_of(limited) == (429, "rate_limited")
    assert 1 <= int(limited["Retry-After"]) <= 60
    assert bystander.call("GET", "me").status_code == 200


def test_ids_are_prefixed_and_time_ordered() -> None:
    first, second = new_id("inb", at_ms=1_000), new_id("inb", at_ms=2_000)
    assert first.startswith("inb_") and looks_like("inb", first) and not looks_like("eml", first)
    assert first < second
    assert len({new_id("eml") for _ in range(1000)}) == 1000


def test_ids_made_in_one_process_strictly_increase() -> None:
    """The mail of one batch is stored within a millisecond: its ids must still sort in order."""
    ids = [new_id("eml") for _ in range(5000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert len({i[4:14] for i in ids}) < len(ids)  # many share a millisecond, and still sort
