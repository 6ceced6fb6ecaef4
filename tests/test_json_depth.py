"""Deeply nested JSON bodies (issue 23, item 10).

``{"a":`` × 100,000 to ``POST /inboxes`` and ``[`` × 50,000 in a label's rules answered 500 after
a ``RecursionError`` in the JSON decoder. A body that nests arrays and objects deeper than
``config.api.parsers.MAX_DEPTH`` (64) is now 400 ``invalid_json`` saying so, before it is parsed;
one 64 deep is still accepted. Over HTTP against the live web process (daphne, or ``manage.py
serve`` in embedded mode), and the depth scan itself against the decoder on generated JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from config.api.parsers import MAX_DEPTH, TooDeep, loads, nests_deeper_than
from labels.models import Label
from tests.live import Stack
from tests.sizes import examples


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
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
        client.timeout = httpx.Timeout(60, connect=5)
        yield client


def post(client: httpx.Client, path: str, body: str, method: str = "POST") -> httpx.Response:
    return client.request(
        method, path, content=body.encode(), headers={"Content-Type": "application/json"}
    )


def nested(depth: int) -> str:
    """An array ``depth`` levels deep: ``[[[…]]]``."""
    return "[" * depth + "]" * depth


def assert_too_deep(response: httpx.Response) -> None:
    assert response.status_code == 400, (response.status_code, response.text[:300])
    error = response.json()["error"]
    assert error["code"] == "invalid_json"
    assert f"deeper than {MAX_DEPTH} levels" in error["message"]


# (what, method, path, body) — every one nests far beyond the limit.
DEEP: list[tuple[str, str, str, str]] = [
    ('{"a": × 100,000 to POST /inboxes', "POST", "inboxes", '{"a":' * 100_000),
    (
        "[ × 50,000 in label rules",
        "POST",
        "labels",
        f'{{"key": "d", "name": "D", "rules": {nested(50_000)}}}',
    ),
    ("objects 1,000 deep, closed", "POST", "inboxes", '{"a":' * 1000 + "1" + "}" * 1000),
    ("[ × 100,000 never closed, to POST /webhooks", "POST", "webhooks", "[" * 100_000),
    (
        "65 deep in an ignored field",
        "POST",
        "labels",
        f'{{"key": "d", "name": "D", "x": {nested(64)}}}',
    ),
]


@pytest.mark.parametrize(("what", "method", "path", "body"), DEEP, ids=[d[0] for d in DEEP])
def test_deep_bodies_are_invalid_json(
    client: httpx.Client, what: str, method: str, path: str, body: str
) -> None:
    assert_too_deep(post(client, path, body, method))
    assert Label.objects.count() == 0


def test_deep_bodies_on_every_kind_of_route(client: httpx.Client) -> None:
    """PATCH, and the send path that the ASGI router hands to Django through the outbox's
    decision wrapper."""
    created = post(client, "labels", '{"key": "ok", "name": "Ok"}')
    assert created.status_code == 200, created.text
    assert_too_deep(post(client, "labels/ok", f'{{"rules": {nested(50_000)}}}', "PATCH"))
    assert Label.objects.get(key="ok").rules == {}
    inbox = post(client, "inboxes", "{}")
    assert inbox.status_code == 200, inbox.text
    send = f'{{"to": ["a@example.com"], "subject": "s", "text": "t", "x": {nested(50_000)}}}'
    assert_too_deep(post(client, f"inboxes/{inbox.json()['id']}/send", send))


def test_the_limit_itself_is_accepted(client: httpx.Client) -> None:
    """64 levels (the body's object and 63 arrays in an ignored field) pass, and brackets in
    strings are text, not nesting."""
    body = {"key": "deep", "name": "Deep", "instructions": "[{" * 900}
    text = json.dumps(body)[:-1] + f', "x": {nested(MAX_DEPTH - 1)}}}'
    response = post(client, "labels", text)
    assert response.status_code == 200, response.text
    assert response.json()["instructions"] == "[{" * 900


def test_invalid_json_is_still_invalid_json(client: httpx.Client) -> None:
    for body in ('{"a": [1, 2', "[" * 10, '{"a": NaN}', '"\\"[[['):
        response = post(client, "inboxes", body)
        assert response.status_code == 400, (body, response.text)
        assert response.json()["error"]["code"] == "invalid_json"


# --- the depth scan against the decoder ------------------------------------------------------

# Text that tries hard to confuse a scan: brackets, quotes and backslashes inside strings.
_TRICKY = st.text(alphabet='[]{}"\\,:ab\u00e9\u2028', max_size=12)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | _TRICKY,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TRICKY, inner, max_size=4),
    max_leaves=40,
)


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth(item) for item in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth(item) for item in value.values()), default=0)
    return 0


@settings(max_examples=examples(400), deadline=None)
@given(value=_VALUES, limit=st.integers(min_value=0, max_value=8), ascii_only=st.booleans())
def test_the_scan_measures_what_the_decoder_would(value: Any, limit: int, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert nests_deeper_than(text, limit) is (depth(value) > limit)


@settings(max_examples=examples(300), deadline=None)
@given(
    runs=st.lists(
        st.tuples(
            st.sampled_from(["[", "{", "]", "}", '"', "\\", '{"a":', ",", "1"]), st.integers(1, 400)
        ),
        max_size=12,
    )
)
def test_no_text_makes_the_decoder_recurse(runs: list[tuple[str, int]]) -> None:
    """Whatever the text, ``loads`` parses it, refuses it as too deep, or finds it invalid:
    never a RecursionError (runs of up to 4,800 brackets; the interpreter's limit is 1,000)."""
    text = "".join(part * count for part, count in runs)
    try:
        loads(text)
    except TooDeep:
        assert nests_deeper_than(text)
    except ValueError:
        pass
