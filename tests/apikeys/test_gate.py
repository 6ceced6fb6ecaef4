"""Every way in lets a request in by the same rules (``apikeys.gate``): the REST API's DRF
views, the raw ASGI wait and stream, and the outbox's ``?wait=`` wrapper answer a bad header, a
key lacking the scope, another workspace's inbox and an exhausted rate alike, in the spec's
envelope, through the real ASGI application."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from channels.testing import ApplicationCommunicator

from apikeys.models import Workspace
from config.asgi import application
from tests.conftest import Api

pytestmark = pytest.mark.django_db(transaction=True)


async def _get(
    path: str, query: str, authorization: str | None, *, method: str = "GET", body: bytes = b""
) -> tuple[int, dict, dict]:
    headers = [(b"host", b"testserver"), (b"content-type", b"application/json")]
    if authorization is not None:
        headers.append((b"authorization", authorization.encode()))
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }
    app = ApplicationCommunicator(application, scope)
    await app.send_input({"type": "http.request", "body": body})
    start = await app.receive_output(10)
    answer = await app.receive_output(10)
    await app.send_input({"type": "http.disconnect"})
    answer_headers = {k.decode().lower(): v.decode() for k, v in start.get("headers", [])}
    is_json = answer_headers.get("content-type", "").startswith("application/json")
    return start["status"], json.loads(answer["body"]) if is_json else {}, answer_headers


def _ways_in(inbox_id: str, item_id: str) -> dict[str, tuple[str, str]]:
    return {
        "REST": (f"/api/v1/inboxes/{inbox_id}", ""),
        "wait": (f"/api/v1/inboxes/{inbox_id}/wait", "timeout=0"),
        "stream": (f"/api/v1/inboxes/{inbox_id}/stream", "timeout=0"),
        "outbox wait": (f"/api/v1/outbox/{item_id}", "wait=1"),
    }


@pytest.fixture
def setup(workspace: Workspace, make_key: Any) -> tuple[str, str]:
    api = Api(make_key(workspace))
    inbox = api.call("POST", "inboxes", {"local_part": "gate"}).json()
    sent = api.call(
        "POST",
        f"inboxes/{inbox['id']}/send",
        {"to": ["x@example.com"], "subject": "s", "text": "t"},
    )
    assert sent.status_code in (200, 202), sent.content
    return inbox["id"], sent.json()["id"]


def _answers(ways: dict[str, tuple[str, str]], authorization: str | None) -> dict[str, Any]:
    async def all_of() -> dict[str, Any]:
        return {
            name: await _get(path, query, authorization) for name, (path, query) in ways.items()
        }

    return asyncio.run(all_of())


@pytest.mark.parametrize("authorization", [None, "Basic dXNlcjpwYXNz", "Bearer", "Bearer pgh_nope"])
def test_bad_credentials_are_the_same_401_everywhere(
    setup: tuple[str, str], authorization: str | None
) -> None:
    answers = _answers(_ways_in(*setup), authorization)
    codes = {name: (status, body["error"]["code"]) for name, (status, body, _) in answers.items()}
    assert set(codes.values()) == {(401, "unauthorized")}, codes
    messages = {body["error"]["message"] for _, body, _ in answers.values()}
    assert len(messages) == 1, messages


def test_a_key_without_the_scope_is_refused_alike_with_or_without_wait(
    setup: tuple[str, str], workspace: Workspace, make_key: Any
) -> None:
    """A read-only key may not send: the same 403 whether the outbox's ``?wait=`` wrapper is in
    front of the view or not, and nothing is sent either way."""
    from outbox.models import OutboxItem

    inbox_id, _ = setup
    reader = make_key(workspace, scopes=("read",))
    body = json.dumps({"to": ["y@example.com"], "subject": "s", "text": "t"}).encode()
    before = OutboxItem.objects.count()
    answers = [
        asyncio.run(
            _get(
                f"/api/v1/inboxes/{inbox_id}/send",
                query,
                f"Bearer {reader}",
                method="POST",
                body=body,
            )
        )
        for query in ("", "wait=5")
    ]
    assert [(s, b["error"]["code"], b["error"]["message"]) for s, b, _ in answers] == [
        (403, "insufficient_scope", "This operation requires the 'send' scope.")
    ] * 2
    assert OutboxItem.objects.count() == before


def test_another_workspace_is_not_found_everywhere(
    setup: tuple[str, str], other_workspace: Workspace, make_key: Any
) -> None:
    stranger = make_key(other_workspace)
    answers = _answers(_ways_in(*setup), f"Bearer {stranger}")
    assert {name: (s, b["error"]["code"]) for name, (s, b, _) in answers.items()} == {
        name: (404, "not_found") for name in answers
    }


def test_the_rate_counts_every_way_in_and_refuses_alike(
    setup: tuple[str, str], workspace: Workspace, make_key: Any, settings: Any
) -> None:
    """One window, one counter: two requests through each of the four ways use up a limit of
    eight, and the ninth is 429 with Retry-After wherever it comes in."""
    settings.RATE_LIMIT_PER_MINUTE = 8
    key = make_key(workspace)
    ways = _ways_in(*setup)
    first, second = _answers(ways, f"Bearer {key}"), _answers(ways, f"Bearer {key}")
    assert all(s < 400 for s, _, _ in [*first.values(), *second.values()]), (first, second)
    for name, (path, query) in ways.items():
        status, body, headers = asyncio.run(_get(path, query, f"Bearer {key}"))
        assert (status, body["error"]["code"]) == (429, "rate_limited"), name
        assert int(headers["retry-after"]) >= 1, name
