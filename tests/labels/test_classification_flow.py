"""The classifier in the receive flow, against a real chat-completions server on 127.0.0.1:
labels applied in email.received, the timeout that keeps email.received from waiting long, late
answers as email.labeled, the workspace switch, and the sweeper for lost tasks."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from apikeys.models import Workspace
from events.models import Event
from inboxes import services as inbox_services
from inboxes.models import Inbox
from labels.models import EmailLabel, Label
from mail import classification, pipeline
from mail.models import Email
from tests.conftest import Api
from tests.labels.fake_llm import FakeLLM, Reply, completion, token
from tests.mail.messages import message

pytestmark = pytest.mark.django_db


def yes(p: float) -> Reply:
    return Reply(completion("yes", [token("yes", p, {"yes": p, "no": 1 - p})]))


@pytest.fixture
def llm(settings) -> Iterator[FakeLLM]:  # type: ignore[no-untyped-def]
    server = FakeLLM(replies=[yes(0.93)]).start()
    settings.CLASSIFIER_URL = server.url
    settings.CLASSIFIER_MODEL = "test-model"
    settings.CLASSIFIER_TIMEOUT = 1.0
    yield server
    server.stop()


@pytest.fixture
def inbox(workspace: Workspace) -> Inbox:
    Label.objects.create(
        workspace=workspace, key="reset", name="Reset", instructions="Is this a password reset?"
    )
    return inbox_services.inbox_create(workspace=workspace, local_part="classified")


@pytest.fixture(autouse=True)
def _commit_hooks_run(django_capture_on_commit_callbacks) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """The test's transaction never commits; run what would run after commit (the task)."""
    global _capture
    _capture = django_capture_on_commit_callbacks
    yield


_capture = None


def receive(inbox: Inbox, subject: str = "Reset your password") -> Email:
    assert _capture is not None
    with _capture(execute=True):
        delivery = pipeline.receive_one(
            message(to=inbox.address, subject=subject), to=inbox.address
        )
    return Email.objects.get(pk=delivery.email_id)


def test_classifier_label_in_email_received(llm: FakeLLM, inbox: Inbox, api: Api) -> None:
    email = receive(inbox)
    assert email.announced_at is not None
    labels = api.call("GET", f"emails/{email.pk}").json()["labels"]
    assert labels == [{"key": "reset", "source": "classifier", "confidence": 0.93}]
    received = Event.objects.get(type="email.received", inbox_id=inbox.pk)
    assert received.data["email"]["labels"] == labels
    labeled = Event.objects.get(type="email.labeled", inbox_id=inbox.pk)
    assert labeled.data["labels"] == labels and labeled.id > received.id
    asked = llm.requests[0].body["messages"][-1]["content"]
    assert "Is this a password reset?" in asked and "Reset your password" in asked


def test_below_threshold_or_no_is_not_applied(llm: FakeLLM, inbox: Inbox) -> None:
    Label.objects.filter(key="reset").update(threshold=0.95)
    receive(inbox)
    llm.reply(Reply(completion("no", [token("no", 0.9, {"no": 0.9, "yes": 0.1})])))
    Label.objects.filter(key="reset").update(threshold=0.5)
    receive(inbox, subject="Lunch?")
    assert EmailLabel.objects.count() == 0
    assert Event.objects.filter(type="email.received").count() == 2
    assert not Event.objects.filter(type="email.labeled").exists()


def test_slow_classifier_does_not_hold_email_received(llm: FakeLLM, inbox: Inbox) -> None:
    llm.reply(Reply(yes(0.9).body, delay=2.0))  # CLASSIFIER_TIMEOUT is 1 s
    email = receive(inbox)
    received = Event.objects.get(type="email.received", inbox_id=inbox.pk)
    assert received.data["email"]["labels"] == []  # announced without waiting for the answer
    labeled = Event.objects.get(type="email.labeled", inbox_id=inbox.pk)  # the late answer
    assert labeled.data["labels"] == [{"key": "reset", "source": "classifier", "confidence": 0.9}]
    assert labeled.id > received.id
    assert EmailLabel.objects.get(email=email).source == "classifier"


def test_classifier_errors_fall_back_to_no_label(llm: FakeLLM, inbox: Inbox) -> None:
    llm.reply(Reply("{broken", status=500))
    email = receive(inbox)
    assert email.announced_at is not None and EmailLabel.objects.count() == 0


def test_workspace_switch(llm: FakeLLM, inbox: Inbox, workspace: Workspace) -> None:
    workspace.classifier_enabled = False
    workspace.save()
    receive(inbox)
    assert llm.requests == [] and EmailLabel.objects.count() == 0
    assert Event.objects.filter(type="email.received").count() == 1


def test_removed_classifier_label_is_a_negative_example(
    llm: FakeLLM, inbox: Inbox, api: Api
) -> None:
    email = receive(inbox)
    api.call("PATCH", f"emails/{email.pk}", {"remove_labels": ["reset"]})
    assert EmailLabel.objects.count() == 0
    # The classifier is not allowed to put it back on this email, and the next request carries
    # the example.
    classification.classify_and_announce(email_id=email.pk)
    receive(inbox, subject="Another reset")
    prompt = llm.requests[-1].body["messages"][-1]["content"]
    assert "Reset your password" in prompt  # the example's subject
    assert EmailLabel.objects.filter(email=email).count() == 0


def test_sweeper_announces_emails_whose_task_was_lost(llm: FakeLLM, inbox: Inbox, settings) -> None:  # type: ignore[no-untyped-def]
    from config.celery import app

    # The task goes to a queue of this test's own that nobody consumes, deleted after: a lost
    # task. (Swapping the broker URL instead left the process's producer pool on the other
    # broker, and later tests' tasks went there.)
    previous = app.conf.task_default_queue
    app.conf.task_always_eager, app.conf.task_default_queue = False, f"test-{uuid.uuid4().hex}"
    try:
        email = receive(inbox)
    finally:
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(app.conf.task_default_queue)
        app.conf.task_always_eager, app.conf.task_default_queue = True, previous
    assert Email.objects.get(pk=email.pk).announced_at is None
    assert classification.announce_overdue() == 0  # not overdue yet
    with time_machine.travel(timezone.now() + timedelta(seconds=40)):
        assert classification.announce_overdue() == 1
        assert classification.announce_overdue() == 0
    assert Event.objects.filter(type="email.received", inbox_id=inbox.pk).count() == 1
