"""Issue 28, points 1 and 2: the wait's filters (``to``, ``header``, ``label``, ``has_code``,
``has_link``, ``link_kind``, ``body``, ``nth``) and the workspace-wide ``GET /emails/wait``.

End to end: the SMTP receiver and the web app run as separate processes (one ``serve`` in
embedded mode); mail goes in over SMTP, the waits are real HTTP long-polls. Each filter is seen
releasing a parked waiter (the wake-up path) and, where it matters, answering from what is
already stored (the first read): both judge with the one matcher of ``mail.waiting``. The
classifier is a real chat-completions server on 127.0.0.1 (``tests.labels.fake_llm``) whose
answer comes after ``CLASSIFIER_TIMEOUT``, so its label lands after ``email.received``.
"""

from __future__ import annotations

import smtplib
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from events.models import Event
from inboxes import services as inbox_services
from inboxes.models import Inbox
from labels.models import Label
from tests.dns_server import verified_domain
from tests.labels.fake_llm import FakeLLM, Reply, completion, token
from tests.live import Stack
from tests.mail.messages import message

CLASSIFIER_TIMEOUT = "0.5"  # seconds email.received waits for the classifier
CLASSIFIER_DELAY = 2.0  # seconds the classifier takes: its label is late


def _late_yes() -> Reply:
    body = completion("yes", [token("yes", 0.9, {"yes": 0.9, "no": 0.1})])
    return Reply(body, delay=CLASSIFIER_DELAY)


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    server = FakeLLM(replies=[_late_yes()]).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker, llm: FakeLLM) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"])
    running.env.update(
        CLASSIFIER_URL=llm.url, CLASSIFIER_MODEL="test-model", CLASSIFIER_TIMEOUT=CLASSIFIER_TIMEOUT
    )
    running.start()
    yield running
    running.stop()


@pytest.fixture
def setup(transactional_db: None, workspace: Workspace) -> tuple[Inbox, str]:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="ci")
    key = key_services.api_key_create(
        workspace=workspace, name="ci", scopes=["read"], by=Actor.system("tests")
    ).plain
    return inbox, key


def send(stack: Stack, raw: bytes, to: str, mail_from: str = "sender@example.org") -> None:
    with smtplib.SMTP("127.0.0.1", stack.smtp_port, timeout=30) as smtp:
        smtp.sendmail(mail_from, [to], raw)


def tagged(inbox: Inbox, tag: str) -> str:
    local, domain = inbox.address.split("@")
    return f"{local}+{tag}@{domain}"


def send_to_inbox(stack: Stack, inbox: Inbox, subject: str, **kwargs: object) -> None:
    send(stack, message(to=inbox.address, subject=subject, **kwargs), inbox.address)  # type: ignore[arg-type]


class Waiter(threading.Thread):
    """One long-poll in a thread of its own; ``response`` once it answered."""

    def __init__(self, stack: Stack, key: str, path: str, params: dict | list) -> None:
        super().__init__(daemon=True)
        self.stack, self.key, self.path, self.params = stack, key, path, params
        self.response: httpx.Response | None = None

    def run(self) -> None:
        with self.stack.client(self.key) as client:
            self.response = client.get(self.path, params=self.params)

    def answer(self) -> httpx.Response:
        self.join(30)
        assert self.response is not None, "the waiter did not answer"
        return self.response


def parked(stack: Stack, key: str, path: str, params: dict | list) -> Waiter:
    """A waiter started with ``since`` a second back (a slow machine that parks it after the
    mail arrived still finds the mail), given a moment to park."""
    since = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    if isinstance(params, dict):
        params = {"timeout": 30, "since": since, **params}
    else:
        params = [("timeout", "30"), ("since", since), *params]
    waiter = Waiter(stack, key, path, params)
    waiter.start()
    time.sleep(0.5)
    return waiter


def still_waiting(*waiters: Waiter) -> bool:
    """Gives wrongly released waiters time to answer, then whether none has."""
    time.sleep(1.0)
    return all(w.is_alive() and w.response is None for w in waiters)


def test_a_waiter_per_plus_tag_is_released_by_its_own_mail_only(
    stack: Stack, setup: tuple[Inbox, str]
) -> None:
    inbox, key = setup
    path = f"inboxes/{inbox.pk}/wait"
    run1 = parked(stack, key, path, {"to": tagged(inbox, "run1")})
    run2 = parked(stack, key, path, {"to": tagged(inbox, "run2")})
    untagged = parked(stack, key, path, {"to": inbox.address})
    send(stack, message(to=tagged(inbox, "run2"), subject="for run2"), tagged(inbox, "run2"))
    assert run2.answer().status_code == 200
    assert run2.response.json()["subject"] == "for run2"
    assert run2.response.json()["inbox_id"] == inbox.pk  # the tag's mail lands in the inbox
    send(stack, message(to=tagged(inbox, "run10"), subject="a longer tag"), tagged(inbox, "run10"))
    send(stack, message(to=tagged(inbox, "RUN1"), subject="other case"), tagged(inbox, "RUN1"))
    assert still_waiting(run1, untagged)  # the local part and its tag are exact
    # The domain in any case.
    upper = tagged(inbox, "run1").replace("pigeonhole.test", "PigeonHole.TEST")
    send(stack, message(to=upper, subject="for run1"), upper)
    assert run1.answer().status_code == 200
    assert run1.response.json()["subject"] == "for run1"
    assert untagged.is_alive()
    send(stack, message(to=inbox.address, subject="no tag"), inbox.address)
    assert untagged.answer().json()["subject"] == "no tag"


def test_header_filters_must_all_match(stack: Stack, setup: tuple[Inbox, str]) -> None:
    inbox, key = setup
    path = f"inboxes/{inbox.pk}/wait"
    params = [("header", "x-ci-run: 4711"), ("header", "X-Env:ci")]  # any case, blanks aside
    waiter = parked(stack, key, path, params)
    send_to_inbox(stack, inbox, "wrong run", headers={"X-CI-Run": "47110", "X-Env": "ci"})
    send_to_inbox(stack, inbox, "run only", headers={"X-CI-Run": "4711"})
    send_to_inbox(stack, inbox, "env only", headers={"X-Env": "ci"})
    assert still_waiting(waiter)
    send_to_inbox(stack, inbox, "both", headers={"X-CI-Run": "4711", "X-Env": "ci"})
    assert waiter.answer().status_code == 200 and waiter.response.json()["subject"] == "both"


def test_nth_releases_on_the_third_match_and_not_before(
    stack: Stack, setup: tuple[Inbox, str]
) -> None:
    inbox, key = setup
    before = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    path = f"inboxes/{inbox.pk}/wait"
    waiter = parked(stack, key, path, {"nth": 3, "subject": "^step "})
    send_to_inbox(stack, inbox, "step 1")
    send_to_inbox(stack, inbox, "unrelated")
    send_to_inbox(stack, inbox, "step 2")
    assert still_waiting(waiter)
    send_to_inbox(stack, inbox, "step 3")
    assert waiter.answer().status_code == 200 and waiter.response.json()["subject"] == "step 3"
    with stack.client(key) as client:  # the same count from what is stored
        params = {"since": before, "timeout": 0, "subject": "^step "}
        assert client.get(path, params={**params, "nth": 2}).json()["subject"] == "step 2"
        assert client.get(path, params={**params, "nth": 4}).status_code == 204


def test_a_label_waiter_is_released_when_the_late_classifier_label_lands(
    stack: Stack, setup: tuple[Inbox, str], llm: FakeLLM
) -> None:
    inbox, key = setup
    Label.objects.create(
        workspace=inbox.workspace, key="reset", name="Reset", instructions="A password reset?"
    )
    waiter = parked(stack, key, f"inboxes/{inbox.pk}/wait", {"label": "reset"})
    send_to_inbox(stack, inbox, "Reset your password")
    response = waiter.answer()
    assert response.status_code == 200
    assert response.json()["labels"] == [
        {"key": "reset", "source": "classifier", "confidence": 0.9}
    ]
    # It was announced without the label, which came later: the label released the waiter.
    received = Event.objects.get(type="email.received", inbox_id=inbox.pk)
    assert received.data["email"]["labels"] == []
    labeled = Event.objects.get(type="email.labeled", inbox_id=inbox.pk)
    assert labeled.id > received.id and labeled.data["email"]["id"] == response.json()["id"]
    with stack.client(key) as client:
        refused = client.get(f"inboxes/{inbox.pk}/wait", params={"label": "nope"})
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == "unknown_label"
        refused = client.get("emails/wait", params={"label": "nope"})
        assert refused.json()["error"]["code"] == "unknown_label"


def test_code_link_and_body_filters(stack: Stack, setup: tuple[Inbox, str]) -> None:
    inbox, key = setup
    path = f"inboxes/{inbox.pk}/wait"
    code = parked(stack, key, path, {"has_code": "true", "body": r"sign-in request from \w+"})
    reset = parked(stack, key, path, {"link_kind": "reset"})
    plain = parked(stack, key, path, {"has_code": "false", "has_link": "false"})
    send_to_inbox(stack, inbox, "Shipped", text="Your parcel has shipped.")
    send_to_inbox(stack, inbox, "Code", text="Your code is 482913.")
    assert plain.answer().json()["subject"] == "Shipped"  # no code, no link
    assert still_waiting(code, reset)
    send_to_inbox(stack, inbox, "Sign-in", text="A Sign-in request from Berlin: code 552901.")
    assert code.answer().json()["subject"] == "Sign-in"
    assert code.response.json()["extracted"]["code"] == "552901"
    assert reset.is_alive()
    link = "https://acme.example/password/reset?token=5x7d2f"
    send_to_inbox(stack, inbox, "Reset", text=f"Reset your password:\n{link}\n")
    assert reset.answer().json()["subject"] == "Reset"


def test_emails_wait_finds_plus_tags_across_a_catch_all_domain(
    stack: Stack, setup: tuple[Inbox, str], other_workspace: Workspace
) -> None:
    inbox, key = setup
    verified_domain(inbox.workspace, "catch.test", catch_all=True)
    before = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    wanted = "signup+run9@catch.test"
    waiter = parked(stack, key, "emails/wait", {"to": wanted, "count": 2})
    send(stack, message(to=wanted, subject="first"), wanted)
    send(stack, message(to="signup+run8@catch.test", subject="other tag"), "signup+run8@catch.test")
    send(stack, message(to="someone@catch.test", subject="other user"), "someone@catch.test")
    send(stack, message(to=inbox.address, subject="elsewhere"), inbox.address)
    assert still_waiting(waiter)  # one match of two
    send(stack, message(to=wanted, subject="second"), "signup+run9@Catch.Test")
    response = waiter.answer()
    assert response.status_code == 200
    data = response.json()["data"]
    assert [email["subject"] for email in data] == ["first", "second"]  # oldest first
    created = Inbox.objects.get(address="signup@catch.test")  # made by the first message
    assert created.source == "catch_all" and {e["inbox_id"] for e in data} == {created.pk}
    with stack.client(key) as client:
        params = {"to": wanted, "since": before, "timeout": 0}
        stored = client.get("emails/wait", params={**params, "count": 2, "inbox": created.address})
        assert [e["subject"] for e in stored.json()["data"]] == ["first", "second"]
        second = client.get("emails/wait", params={**params, "nth": 2})
        assert [e["subject"] for e in second.json()["data"]] == ["second"]
        elsewhere = client.get("emails/wait", params={**params, "inbox": inbox.pk})
        assert elsewhere.status_code == 204 and elsewhere.content == b""
    # Another workspace's key sees none of it, and cannot name the inbox.
    other = key_services.api_key_create(
        workspace=other_workspace, name="o", scopes=["read"], by=Actor.system("tests")
    ).plain
    with stack.client(other) as client:
        assert client.get("emails/wait", params=params).status_code == 204
        foreign = client.get("emails/wait", params={**params, "inbox": created.pk})
        assert foreign.status_code == 404 and foreign.json()["error"]["code"] == "not_found"
        foreign = client.get(f"inboxes/{created.pk}/wait", params=params)
        assert foreign.status_code == 404 and foreign.json()["error"]["code"] == "not_found"


def test_wait_refusals(stack: Stack, setup: tuple[Inbox, str], other_workspace: Workspace) -> None:
    inbox, key = setup
    sender = key_services.api_key_create(
        workspace=inbox.workspace, name="s", scopes=["send"], by=Actor.system("tests")
    ).plain
    with stack.client(sender) as client:  # a key lacking `read`
        for path in ("emails/wait", f"inboxes/{inbox.pk}/wait"):
            response = client.get(path, params={"timeout": 0})
            assert response.status_code == 403, path
            assert response.json()["error"]["code"] == "insufficient_scope"
    response = httpx.get(stack.base_url + "/api/v1/emails/wait")
    assert response.status_code == 401 and response.json()["error"]["code"] == "unauthorized"
    bad = [
        ({"to": "nobody"}, "to"),
        ({"to": "@pigeonhole.test"}, "to"),
        ({"header": "X-Run 4711"}, "header"),
        ({"header": ": value"}, "header"),
        ({"nth": 0}, "nth"),
        ({"nth": 101}, "nth"),
        ({"has_code": "yes"}, "has_code"),
        ({"link_kind": "magic"}, "link_kind"),
        ({"link_kind": "reset", "has_link": "false"}, "link_kind"),
        ({"body": "("}, "body"),
        ({"body": "((((a{100}){100}){100}){100})"}, "body"),
    ]
    with stack.client(key) as client:
        for path, extra in (
            (f"inboxes/{inbox.pk}/wait", []),
            ("emails/wait", [({"count": 0}, "count"), ({"count": 101}, "count")]),
        ):
            for params, field in [*bad, *extra]:
                response = client.get(path, params={"timeout": 0, **params})
                assert response.status_code == 400, (path, params)
                error = response.json()["error"]
                assert error["code"] == "validation_error", (path, params)
                assert [issue["path"] for issue in error["issues"]] == [field], (path, params)
        response = client.get(f"inboxes/{inbox.pk}/wait", params={"count": 2})
        assert response.json()["error"]["issues"][0]["path"] == "count"  # the workspace wait's
        response = client.get("emails/wait", params={"inbox": "nobody@pigeonhole.test"})
        assert response.status_code == 404


def test_lost_wake_ups_reach_the_workspace_wait_from_the_log(
    stack: Stack, setup: tuple[Inbox, str], settings: Any
) -> None:
    """Mail whose wake-ups nobody hears (published under another channel-layer prefix, as if the
    web process was cut off from Redis then) still releases a parked ``/emails/wait``: the web
    process's sweep reads the log for the workspace's group as for an inbox's."""
    from mail.pipeline import receive_one

    inbox, key = setup
    if settings.REDIS_URL:  # embedded: this process's in-memory layer is unheard by the server
        settings.CHANNEL_LAYERS = {
            "default": {
                "BACKEND": "config.layers.PubSubLayer",
                "CONFIG": {"hosts": [settings.REDIS_URL], "prefix": "nobody-listens"},
            }
        }
    waiter = parked(stack, key, "emails/wait", {"to": tagged(inbox, "lost"), "count": 2})
    for n in (1, 2):
        receive_one(
            message(to=tagged(inbox, "lost"), subject=f"lost {n}"), to=tagged(inbox, "lost")
        )
    response = waiter.answer()
    assert response.status_code == 200
    assert [e["subject"] for e in response.json()["data"]] == ["lost 1", "lost 2"]
