"""Query strings are read as the OpenAPI document describes them (found by the schema fuzzer's
negative_data_rejection check): a blank value is a value, a repeated parameter is refused,
booleans are true/false and integers are digits, an unknown name is refused (issue 25: a typo
must never widen a query); the long-poll and stream paths too."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.testing import ApplicationCommunicator

from apikeys.models import Workspace
from config.asgi import application
from tests.conftest import Api, error_of

pytestmark = pytest.mark.django_db


def issue(response) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    assert error_of(response) == (400, "validation_error"), response.content
    (only,) = response.json()["error"]["issues"]
    return only["path"], only["message"]


@pytest.mark.parametrize(
    ("path", "query", "name"),
    [
        ("inboxes", "tag=", "tag"),
        ("inboxes", "q=", "q"),
        ("inboxes", "limit=", "limit"),
        ("inboxes", "limit=5.0", "limit"),
        ("inboxes", "limit=5&limit=6", "limit"),
        ("inboxes", "include_expired=1", "include_expired"),
        ("inboxes", "include_expired=yes", "include_expired"),
        ("inboxes", "include_expired=", "include_expired"),
        ("outbox", "status=", "status"),
        ("emails", "since=", "since"),
        ("emails", "unread=null", "unread"),
        ("emails", "unread=0", "unread"),
        ("keys", "limit=1e2", "limit"),
        ("inboxes", "q=" + "x" * 195 + "%20" * 10, "q"),  # 205 as sent, 195 once trimmed
        ("inboxes", "unknown=1&unknown=2", "unknown"),
        ("emails", "inbox_id=nonsense", "inbox_id"),
        ("me", "limit=5", "limit"),
    ],
)
def test_bad_query_values_are_refused(api: Api, path: str, query: str, name: str) -> None:
    assert issue(api.get(f"/api/v1/{path}?{query}"))[0] == name


def test_good_query_values_work(api: Api) -> None:
    api.call("POST", "inboxes", {"local_part": "one", "tags": ["t"]})
    assert api.get("/api/v1/inboxes?tag=t&limit=5&include_expired=false").json()["data"]
    assert api.get("/api/v1/emails?unread=true&limit=100").status_code == 200
    assert api.get("/api/v1/inboxes?cursor=").status_code == 200  # a blank cursor: first page


async def _get(path: str, query: str, key: str, timeout: float = 5) -> tuple[int, Any]:
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": "GET",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "headers": [(b"authorization", f"Bearer {key}".encode()), (b"host", b"testserver")],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }
    app = ApplicationCommunicator(application, scope)
    await app.send_input({"type": "http.request", "body": b""})
    start = await app.receive_output(timeout)
    body = await app.receive_output(timeout)
    await app.send_input({"type": "http.disconnect"})
    return start["status"], body.get("body", b"")


@pytest.mark.parametrize(
    ("suffix", "query", "name"),
    [
        ("wait", "timeout=5.0", "timeout"),
        ("wait", "timeout=0&timeout=0", "timeout"),
        ("wait", "subject=a{99999999999}", "subject"),  # was a 500 (OverflowError)
        ("stream", "last_event_id=abc", "last_event_id"),
        ("stream", "last_event_id=-1", "last_event_id"),
        ("stream", "last_event_id=1&last_event_id=2", "last_event_id"),
        ("wait", "subjet=x", "subjet"),
        ("stream", "lastEventId=1", "lastEventId"),
    ],
)
def test_wait_and_stream_validate_their_query(
    transactional_db: None,
    workspace: Workspace,
    make_key: Any,
    suffix: str,
    query: str,
    name: str,
) -> None:
    import json

    key = make_key(workspace)
    inbox = Api(key).call("POST", "inboxes", {"local_part": "rt"}).json()
    status, body = asyncio.run(_get(f"/api/v1/inboxes/{inbox['id']}/{suffix}", query, key))
    assert status == 400, body
    error = json.loads(body)["error"]
    assert error["code"] == "validation_error" and [i["path"] for i in error["issues"]] == [name]
