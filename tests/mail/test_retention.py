"""Retention (issue 30, item 1): expired inboxes deleted with their mail after their workspace's
grace, mail past the workspace's maximum age, both by the sweep beat runs
(``mail.services.retention_sweep``), a chunk of mail per transaction; and the quota that counts
only inboxes that have not expired (item 2)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.conf import settings as django_settings
from django.utils import timezone

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Membership, Role, Workspace
from config.api.errors import ValidationFailed
from events.models import Event
from inboxes import services as inbox_services
from inboxes.models import Inbox
from labels.models import EmailLabel
from mail import pipeline, services
from mail.models import Attachment, Email, RawMessage
from tests.conftest import Api, error_of
from tests.factories import MembershipFactory
from tests.mail.messages import PDF, message
from tests.mail.storage import stored_bytes
from webhooks import services as webhook_services
from webhooks.models import Delivery

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _small_chunks(settings) -> None:  # type: ignore[no-untyped-def]
    settings.RETENTION_CHUNK = 2  # several chunks per inbox, as a large purge takes
    settings.RETENTION_PAUSE = 0


def deliver(inbox: Inbox, subject: str = "Hi") -> str:
    raw = message(to=inbox.address, subject=subject, attachments=[("a.pdf", "x/pdf", PDF)])
    receipt = pipeline.receive_one(raw, to=inbox.address)
    assert receipt.email_id, receipt
    return receipt.email_id


def disposable(workspace: Workspace, name: str, minutes: int = 10) -> Inbox:
    return inbox_services.inbox_create(workspace=workspace, local_part=name, ttl_minutes=minutes)


def test_an_inbox_past_its_grace_disappears_with_its_mail_and_says_so_once(
    workspace: Workspace,
) -> None:
    workspace.expired_inbox_grace_hours = 2
    workspace.save()
    webhook_services.endpoint_create(
        workspace=workspace,
        url="https://hooks.example/in",
        events=["inbox.deleted"],
        inbox_ids=[],
        label_keys=[],
        by=Actor.system("tests"),
    )
    doomed = disposable(workspace, "doomed")
    kept = disposable(workspace, "kept", minutes=600)
    ids = [deliver(doomed, f"m{i}") for i in range(5)]  # three chunks of two
    deliver(kept)
    expiry = doomed.expires_at

    # Expired, but within the grace: readable by id, untouched.
    assert services.retention_sweep(now=expiry + timedelta(hours=1)).inboxes == 0
    assert Inbox.objects.filter(pk=doomed.pk).exists()

    swept = services.retention_sweep(now=expiry + timedelta(hours=2, minutes=1))
    assert swept.inboxes == 1
    assert not Inbox.objects.filter(pk=doomed.pk).exists()
    assert not Email.objects.filter(pk__in=ids).exists()
    assert not RawMessage.objects.filter(email_id__in=ids).exists()
    assert not Attachment.objects.filter(email_id__in=ids).exists()
    assert not EmailLabel.objects.filter(email_id__in=ids).exists()
    assert Inbox.objects.get(pk=kept.pk).email_count == 1  # another inbox keeps its mail
    deleted = Event.objects.filter(type="inbox.deleted", inbox_id=doomed.pk)
    assert [(e.data["inbox"]["address"], e.data["reason"]) for e in deleted] == [
        (doomed.address, "retention")
    ]
    assert [d.event for d in Delivery.objects.filter(workspace_id=workspace.pk)] == [
        "inbox.deleted"
    ]

    # A second sweep finds nothing: the event is emitted once.
    assert services.retention_sweep(now=expiry + timedelta(hours=3)).inboxes == 0
    assert Event.objects.filter(type="inbox.deleted", inbox_id=doomed.pk).count() == 1


def test_a_grace_of_zero_deletes_at_expiry_and_each_workspace_keeps_its_own(
    workspace: Workspace, other_workspace: Workspace
) -> None:
    workspace.expired_inbox_grace_hours = 0
    workspace.save()
    now_gone = disposable(workspace, "at-expiry")
    default_grace = disposable(other_workspace, "week")  # 168 hours
    deliver(now_gone)
    later = now_gone.expires_at + timedelta(minutes=1)
    assert services.retention_sweep(now=later).inboxes == 1
    assert not Inbox.objects.filter(pk=now_gone.pk).exists()
    assert Inbox.objects.filter(pk=default_grace.pk).exists()
    assert services.retention_sweep(now=later + timedelta(hours=167)).inboxes == 0
    assert services.retention_sweep(now=later + timedelta(hours=168)).inboxes == 1
    assert not Inbox.objects.filter(pk=default_grace.pk).exists()


def test_an_inbox_extended_after_expiry_is_active_again_and_kept(
    api: Api, workspace: Workspace
) -> None:
    workspace.expired_inbox_grace_hours = 0
    workspace.save()
    inbox = disposable(workspace, "revived", minutes=1)
    deliver(inbox)
    with time_machine.travel(inbox.expires_at + timedelta(minutes=5)):
        extended = api.call("PATCH", f"inboxes/{inbox.pk}", {"extend_minutes": 60})
        assert extended.status_code == 200, extended.content
        assert services.retention_sweep().inboxes == 0
    assert Inbox.objects.get(pk=inbox.pk).email_count == 1


def test_permanent_inboxes_are_never_deleted_by_age_but_their_old_mail_is(
    workspace: Workspace,
) -> None:
    workspace.email_retention_days = 30
    workspace.save()
    permanent = inbox_services.inbox_create(workspace=workspace, local_part="forever")
    old = [deliver(permanent, "old") for _ in range(3)]
    new = deliver(permanent, "new")
    Email.objects.filter(pk__in=old).update(received_at=timezone.now() - timedelta(days=31))
    before = Inbox.objects.get(pk=permanent.pk)

    swept = services.retention_sweep(now=timezone.now() + timedelta(days=3650))
    # Ten years on: the inbox is still there (permanent), and so is nothing older than 30 days.
    assert swept.inboxes == 0 and Inbox.objects.filter(pk=permanent.pk).exists()
    assert swept.emails == 4

    permanent2 = inbox_services.inbox_create(workspace=workspace, local_part="forever2")
    fresh = deliver(permanent2, "fresh")
    old2 = [deliver(permanent2, "stale") for _ in range(3)]
    Email.objects.filter(pk__in=old2).update(received_at=timezone.now() - timedelta(days=31))
    swept = services.retention_sweep()
    assert swept.emails == 3
    assert list(Email.objects.filter(inbox=permanent2).values_list("pk", flat=True)) == [fresh]
    assert not RawMessage.objects.filter(email_id__in=old2).exists()
    inbox = Inbox.objects.get(pk=permanent2.pk)
    assert inbox.email_count == inbox.unread_count == 1
    assert inbox.stored_bytes == stored_bytes(permanent2.pk) > 0
    assert before.stored_bytes > 0 and new not in old


def test_mail_is_kept_forever_without_a_maximum_age(workspace: Workspace) -> None:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="keeper")
    email_id = deliver(inbox)
    Email.objects.filter(pk=email_id).update(received_at=timezone.now() - timedelta(days=9000))
    assert services.retention_sweep().emails == 0
    assert Email.objects.filter(pk=email_id).exists()


def test_a_sweep_out_of_time_leaves_the_rest_for_the_next(workspace: Workspace) -> None:
    workspace.expired_inbox_grace_hours = 0
    workspace.save()
    inbox = disposable(workspace, "slow")
    for _ in range(3):
        deliver(inbox)
    later = inbox.expires_at + timedelta(minutes=1)
    assert services.retention_sweep(now=later, seconds=0).inboxes == 0
    assert Inbox.objects.filter(pk=inbox.pk).exists()
    assert services.retention_sweep(now=later).inboxes == 1


def test_the_sweep_runs_on_beat_with_its_cadence_a_setting(workspace: Workspace) -> None:
    entry = django_settings.CELERY_BEAT_SCHEDULE["retention-sweep"]
    assert entry == {
        "task": "mail.retention_sweep",
        "schedule": django_settings.RETENTION_SWEEP_EVERY,
    }
    from mail import tasks

    assert tasks.retention_sweep.name == entry["task"]
    workspace.expired_inbox_grace_hours = 0
    workspace.save()
    inbox = disposable(workspace, "beat")
    Inbox.objects.filter(pk=inbox.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert tasks.retention_sweep() == 1  # what beat (or embedded mode's scheduler) runs
    assert not Inbox.objects.filter(pk=inbox.pk).exists()


# --- the settings ---------------------------------------------------------------------------------


BY = Actor.system("tests")


@pytest.fixture
def owner(workspace: Workspace) -> Membership:
    return MembershipFactory(workspace=workspace, role=Role.OWNER)


def test_the_retention_settings_are_validated(owner: Membership, workspace: Workspace) -> None:
    for field, value in (
        ("expired_inbox_grace_hours", -1),
        ("expired_inbox_grace_hours", 87_601),
        ("email_retention_days", 0),
        ("email_retention_days", 36_501),
    ):
        with pytest.raises(ValidationFailed) as caught:
            key_services.workspace_update(actor=owner, by=BY, **{field: value})
        assert caught.value.issues[0]["path"] == field
    key_services.workspace_update(
        actor=owner, by=BY, expired_inbox_grace_hours=0, email_retention_days=7
    )
    workspace.refresh_from_db()
    assert (workspace.expired_inbox_grace_hours, workspace.email_retention_days) == (0, 7)
    key_services.workspace_update(actor=owner, by=BY, email_retention_days=None)
    workspace.refresh_from_db()
    assert workspace.email_retention_days is None


def test_the_settings_page_edits_them(client, owner: Membership, workspace: Workspace) -> None:  # type: ignore[no-untyped-def]
    client.force_login(owner.user)
    page = client.get("/settings/")
    assert b'name="expired_inbox_grace_hours"' in page.content
    assert b'name="email_retention_days"' in page.content
    form = {"name": workspace.name, "expired_inbox_grace_hours": "-5", "email_retention_days": ""}
    refused = client.post("/settings/save/", form)
    assert refused.status_code == 200 and b"errorlist" in refused.content
    workspace.refresh_from_db()
    assert workspace.expired_inbox_grace_hours == 168
    saved = client.post("/settings/save/", {**form, "expired_inbox_grace_hours": "12"})
    assert saved.status_code == 302
    saved = client.post(
        "/settings/save/", {**form, "expired_inbox_grace_hours": "12", "email_retention_days": "90"}
    )
    workspace.refresh_from_db()
    assert (workspace.expired_inbox_grace_hours, workspace.email_retention_days) == (12, 90)


# --- the quota (item 2) ---------------------------------------------------------------------------


def test_the_quota_counts_inboxes_that_have_not_expired(api: Api, workspace: Workspace) -> None:
    workspace.max_inboxes = 2
    workspace.save()
    permanent = api.call("POST", "inboxes", {})
    short = api.call("POST", "inboxes", {"ttl_minutes": 1})
    assert permanent.status_code == short.status_code == 200
    refused = api.call("POST", "inboxes", {})
    assert error_of(refused) == (429, "limit_reached")
    text = refused.json()["error"]["message"]
    assert "at most 2 inboxes" in text and "has 2" in text
    with time_machine.travel(timezone.now() + timedelta(minutes=2)):
        # The short one expired: it waits for retention, and no longer counts.
        again = api.call("POST", "inboxes", {})
        assert again.status_code == 200, again.content
        assert error_of(api.call("POST", "inboxes", {})) == (429, "limit_reached")
