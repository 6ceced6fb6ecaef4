"""Matrix 2 of issue 11, function-level authorization (OWASP API2, API5).

Generated from the served OpenAPI document and checked against the spec's tables, transcribed
by hand in ``tenancy_world.SPEC_SCOPES`` (not against the server's own ``x-required-scope``):

* every operation x {no credential, malformed header, unknown key, revoked key, expired key}
  answers 401 ``unauthorized``;
* every operation x each single-scope key (and each dashboard role) answers 403
  ``insufficient_scope`` exactly where the tables and decisions.md's implication rules say
  (admin implies read, write and send; write implies read; send implies nothing), and succeeds
  everywhere else;
* the decision endpoint refuses keys of every scope, a member's session, an owner's session
  without the CSRF token and one with a foreign ``Origin``.

(This replaces tests/apikeys/test_scopes.py, whose hand-kept operation list it generalises.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from apikeys import services as key_services
from apikeys import tokens
from apikeys.audit import Actor
from apikeys.models import ApiKey, effective_scopes
from outbox.models import OutboxItem
from tests.security.tenancy_world import (
    IMPLIES,
    SESSION_ONLY,
    SPEC_SCOPES,
    Answer,
    Operation,
    Side,
    body_for,
    build_side,
    call,
    document,
    key_client,
    operations,
    session_client,
    spec_key,
    succeeded,
)

SCOPES = ("read", "write", "send", "admin")
ROLES = ("owner", "admin", "member")
# Dashboard sessions by role (docs/dashboard.md): owners and admins have every scope, members
# read, write and send.
ROLE_SCOPES = {"owner": "admin", "admin": "admin", "member": "write+send"}


def _role_grants(role: str) -> set[str]:
    return set().union(*(IMPLIES[s] for s in ROLE_SCOPES[role].split("+")))


@pytest.fixture
def unlimited(settings) -> None:  # type: ignore[no-untyped-def]
    settings.RATE_LIMIT_PER_MINUTE = 1_000_000


@contextlib.contextmanager
def rolled_back() -> Iterator[None]:
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


def test_implication_rules() -> None:
    for scope, implied in IMPLIES.items():
        assert effective_scopes([scope]) == implied
    assert effective_scopes(["send", "read"]) == {"send", "read"}


def test_spec_tables_and_document_agree() -> None:
    """Every documented operation is in the spec's tables with the same scope, and every
    operation of the tables is documented (wait and stream included)."""
    documented = {op.spec: op.scope for op in operations()}
    assert set(documented) == set(SPEC_SCOPES)
    assert {k: v for k, v in documented.items() if v != SPEC_SCOPES[k]} == {}
    assert len(documented) == len(operations())  # no two operations share a spec entry


# --- credentials --------------------------------------------------------------------------------


def bad_credentials(side: Side) -> dict[str, dict[str, str]]:
    """Headers of every kind of bad credential, by name. The revoked and expired keys and the
    unknown key are well formed (right prefix, length and checksum)."""
    revoked = key_services.api_key_create(
        workspace=side.workspace, name="revoked", scopes=SCOPES, by=Actor.system("tests")
    )
    key_services.api_key_revoke(key=revoked.key, by=Actor.system("tests"))
    expired = key_services.api_key_create(
        workspace=side.workspace,
        name="expired",
        scopes=SCOPES,
        expires_in_days=1,
        by=Actor.system("tests"),
    )
    ApiKey.objects.filter(pk=expired.key.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    unknown = tokens.generate()
    assert tokens.is_well_formed(unknown)
    valid = side.key
    flipped = valid[:-1] + ("A" if valid[-1] != "A" else "B")  # checksum no longer matches
    return {
        "no credential": {},
        "malformed: Basic scheme": {"Authorization": "Basic dXNlcjpwYXNzd29yZA=="},
        "malformed: Token scheme": {"Authorization": f"Token {valid}"},
        "malformed: no scheme": {"Authorization": valid},
        "malformed: empty bearer": {"Authorization": "Bearer"},
        "malformed: truncated key": {"Authorization": f"Bearer {valid[:20]}"},
        "malformed: bad checksum": {"Authorization": f"Bearer {flipped}"},
        "malformed: two keys": {"Authorization": f"Bearer {valid} {valid}"},
        "unknown key": {"Authorization": f"Bearer {unknown}"},
        "revoked key": {"Authorization": f"Bearer {revoked.plain}"},
        "expired key": {"Authorization": f"Bearer {expired.plain}"},
    }


def _client_for(headers: dict[str, str]) -> Any:
    return key_client(None, **headers)


def _unauthorized(answer: Answer) -> bool:
    return answer.error == (401, "unauthorized") and "Bearer" in answer.headers.get(
        "WWW-Authenticate", answer.headers.get("www-authenticate", "")
    )


@pytest.fixture
def side(db: None, unlimited: None) -> Side:
    return build_side("alphamark")


def test_unauthenticated_matrix(side: Side, figure) -> None:  # type: ignore[no-untyped-def]
    """Every in-process operation x every bad credential → 401 unauthorized (with
    WWW-Authenticate), and nothing changes."""
    credentials = bad_credentials(side)
    mismatches, total = [], 0
    for op in [op for op in operations() if not op.channels]:
        for name, headers in credentials.items():
            total += 1
            with rolled_back():
                answer = call(op, side.ids, client=_client_for(headers), body=body_for(op))
            if not _unauthorized(answer):
                mismatches.append(f"{op} with {name}: {answer.status} {answer.text[:150]}")
    figure(
        f"authorization, bad credentials (in-process): {total} cells "
        f"({len(credentials)} credentials), {len(mismatches)} mismatches"
    )
    assert mismatches == []


def _keys_by_scope(side: Side) -> dict[str, str]:
    return {
        scope: key_services.api_key_create(
            workspace=side.workspace, name=f"only {scope}", scopes=[scope], by=Actor.system("tests")
        ).plain
        for scope in SCOPES
    }


def _expect(op: Operation, grants: set[str], *, session: bool) -> str:
    """What the tables say: "ok", "insufficient_scope" or "forbidden"."""
    if op.spec in SESSION_ONLY and not session:
        return "forbidden"  # keys never decide, whatever their scopes (decisions.md)
    return "ok" if SPEC_SCOPES[op.spec] in grants else "insufficient_scope"


def _judge(op: Operation, answer: Answer, expected: str) -> str | None:
    """None when the answer is what the tables say, else why not."""
    if expected == "ok":
        return None if succeeded(answer) else f"expected success, got {answer.status}"
    if answer.error != (403, expected):
        return f"expected 403 {expected}, got {answer.status} {answer.text[:150]}"
    if expected == "insufficient_scope" and SPEC_SCOPES[op.spec] not in answer.text:
        return "the message does not name the required scope"
    return None


def test_scope_matrix(side: Side, figure) -> None:  # type: ignore[no-untyped-def]
    """Every in-process operation x each single-scope key, and x each dashboard role."""
    keys = _keys_by_scope(side)
    mismatches, total, refused = [], 0, 0
    for op in [op for op in operations() if not op.channels]:
        for scope, plain in keys.items():
            total += 1
            expected = _expect(op, IMPLIES[scope], session=False)
            refused += expected != "ok"
            with rolled_back():
                answer = call(op, side.ids, client=key_client(plain), body=body_for(op))
            if why := _judge(op, answer, expected):
                mismatches.append(f"{op} with a {scope} key: {why}")
        for role in ROLES:
            total += 1
            if op.spec in SESSION_ONLY:
                expected = "ok" if role in ("owner", "admin") else "forbidden"
            else:
                expected = _expect(op, _role_grants(role), session=True)
            refused += expected != "ok"
            with rolled_back():
                answer = call(op, side.ids, client=side.sessions[role], body=body_for(op))
            if why := _judge(op, answer, expected):
                mismatches.append(f"{op} as {role}: {why}")
    figure(
        f"authorization, scopes (in-process): {total} cells (4 scopes + 3 roles per "
        f"operation), {refused} refusals expected, {len(mismatches)} mismatches"
    )
    assert mismatches == []


def test_decision_endpoint_refusals(side: Side, figure) -> None:  # type: ignore[no-untyped-def]
    """POST /outbox/{id}/decision: 403 for keys of every scope (all four at once too), for a
    member's session, for an owner's session without the CSRF token or with a foreign Origin;
    the item stays pending. An owner's and an admin's same-origin session may decide."""
    (op,) = [op for op in operations() if op.spec in SESSION_ONLY]
    item_id = side.ids["item_id"]
    everything = key_services.api_key_create(
        workspace=side.workspace, name="all", scopes=SCOPES, by=Actor.system("tests")
    )
    refusals: dict[str, Any] = {
        **{f"{s} key": key_client(p) for s, p in _keys_by_scope(side).items()},
        "key with every scope": key_client(everything.plain),
        "member session": session_client(side.users["member"]),
        "owner session without CSRF token": session_client(side.users["owner"], csrf=False),
        "owner session, foreign Origin": session_client(
            side.users["owner"], origin="https://evil.example"
        ),
        "owner session, Origin null": session_client(side.users["owner"], origin="null"),
        "admin session, foreign Origin": session_client(
            side.users["admin"], origin="http://testserver.evil.example"
        ),
    }
    mismatches = []
    for name, client in refusals.items():
        for decision in ("approve", "reject"):
            answer = call(op, side.ids, client=client, body={"decision": decision})
            if answer.error != (403, "forbidden"):
                mismatches.append(f"{name} {decision}: {answer.status} {answer.text[:150]}")
    assert OutboxItem.objects.get(pk=item_id).status == "pending"
    for role in ("owner", "admin"):
        with rolled_back():
            client = session_client(side.users[role], origin="http://testserver")
            answer = call(op, side.ids, client=client, body={"decision": "reject"})
            if answer.status != 200 or answer.json()["status"] != "rejected":
                mismatches.append(f"{role} same-origin: {answer.status} {answer.text[:150]}")
    figure(
        f"authorization, decision endpoint: {2 * len(refusals)} refusals + 2 allowed, "
        f"{len(mismatches)} mismatches"
    )
    assert mismatches == []


# --- wait and stream, through a live web process --------------------------------------------------


def test_streaming_matrix(live_stack, transactional_db: None, unlimited: None, figure) -> None:  # type: ignore[no-untyped-def]
    """The Channels-served operations x every bad credential (401) and x each single-scope key
    (403 insufficient_scope exactly where the tables say), over HTTP to a live web process."""
    side = build_side("alphamark")
    credentials = bad_credentials(side)
    keys = _keys_by_scope(side)
    mismatches, total = [], 0
    for op in [op for op in operations() if op.channels]:
        for name, headers in credentials.items():
            total += 1
            answer = call(op, side.ids, live=live_stack.base_url, live_headers=headers)
            if not _unauthorized(answer):
                mismatches.append(f"{op} with {name}: {answer.status} {answer.text[:150]}")
        for scope, plain in keys.items():
            total += 1
            answer = call(
                op,
                side.ids,
                live=live_stack.base_url,
                live_headers={"Authorization": f"Bearer {plain}"},
            )
            if why := _judge(op, answer, _expect(op, IMPLIES[scope], session=False)):
                mismatches.append(f"{op} with a {scope} key: {why}")
    # The stream also takes the key as ?access_token= (EventSource cannot send headers): bad
    # tokens are 401 and scopes hold there too; wait does not take it at all.
    tokens_ = {
        name: headers["Authorization"].removeprefix("Bearer ")
        for name, headers in credentials.items()
        if name in ("unknown key", "revoked key", "expired key", "malformed: bad checksum")
    }
    for op in [op for op in operations() if op.channels]:
        is_stream = op.path.endswith("/stream")
        for name, token in [*tokens_.items(), ("the admin key", side.key)]:
            total += 1
            answer = call(op, side.ids, live=live_stack.base_url, query={"access_token": token})
            ok = is_stream and name == "the admin key"
            if succeeded(answer) if ok else _unauthorized(answer):
                continue
            mismatches.append(f"{op} ?access_token= {name}: {answer.status}")
        if is_stream:
            for scope, plain in keys.items():
                total += 1
                answer = call(op, side.ids, live=live_stack.base_url, query={"access_token": plain})
                if why := _judge(op, answer, _expect(op, IMPLIES[scope], session=False)):
                    mismatches.append(f"{op} ?access_token= {scope} key: {why}")
    figure(
        f"authorization, Channels-served: {total} cells ({len(credentials)} bad credentials "
        f"+ 4 scopes per operation, and ?access_token=), {len(mismatches)} mismatches"
    )
    assert mismatches == []


def test_matrix_covers_every_documented_operation() -> None:
    documented = {
        spec_key(method, path)
        for path, item in document()["paths"].items()
        for method in item
        if method in {"get", "post", "put", "patch", "delete"}
    }
    assert {op.spec for op in operations()} == documented == set(SPEC_SCOPES)
