"""``workspace_update`` (the dashboard's settings page writes through it) and its effect on the
API: who may change what, validation, only changed fields written, /me and sends at once."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Membership, Role, Workspace
from config.api.errors import Forbidden, ValidationFailed
from tests.conftest import Api
from tests.factories import MembershipFactory, WorkspaceFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(workspace: Workspace) -> dict[str, Membership]:
    return {
        role: MembershipFactory(workspace=workspace, role=role)
        for role in (Role.OWNER, Role.ADMIN, Role.MEMBER)
    }


@pytest.mark.parametrize("role", [Role.OWNER, Role.ADMIN])
def test_owners_and_admins_change_every_setting(
    people: dict[str, Membership], workspace: Workspace, role: str
) -> None:
    updated = key_services.workspace_update(
        actor=people[role],
        name="  Acme Robotics ",
        require_approval=True,
        classifier_enabled=False,
        allow_permanent_inboxes=False,
        by=Actor.system("tests"),
    )
    workspace.refresh_from_db()
    assert updated.pk == workspace.pk
    assert workspace.name == "Acme Robotics"
    assert workspace.require_approval is True
    assert workspace.classifier_enabled is False
    assert workspace.allow_permanent_inboxes is False
    assert workspace.max_inboxes is None  # the operator's quota is not the workspace's to change


def test_members_may_not_change_settings(
    people: dict[str, Membership], workspace: Workspace
) -> None:
    with pytest.raises(Forbidden):
        key_services.workspace_update(
            actor=people[Role.MEMBER], require_approval=True, by=Actor.system("tests")
        )
    workspace.refresh_from_db()
    assert workspace.require_approval is False


def test_none_leaves_a_setting_alone(people: dict[str, Membership], workspace: Workspace) -> None:
    Workspace.objects.filter(pk=workspace.pk).update(require_approval=True, name="Kept")
    key_services.workspace_update(
        actor=people[Role.OWNER], classifier_enabled=False, by=Actor.system("tests")
    )
    workspace.refresh_from_db()
    assert (workspace.name, workspace.require_approval, workspace.classifier_enabled) == (
        "Kept",
        True,
        False,
    )


def test_only_changed_fields_are_written(
    people: dict[str, Membership], workspace: Workspace
) -> None:
    with CaptureQueriesContext(connection) as unchanged:
        key_services.workspace_update(
            actor=people[Role.OWNER],
            name=workspace.name,
            require_approval=False,
            by=Actor.system("tests"),
        )
    assert not [q for q in unchanged.captured_queries if q["sql"].startswith("UPDATE")]
    with CaptureQueriesContext(connection) as changed:
        key_services.workspace_update(
            actor=people[Role.OWNER],
            name=workspace.name,
            require_approval=True,
            by=Actor.system("tests"),
        )
    updates = [q["sql"] for q in changed.captured_queries if q["sql"].startswith("UPDATE")]
    assert len(updates) == 1
    assert '"require_approval"' in updates[0] and '"name"' not in updates[0]


@pytest.mark.parametrize(
    ("name", "message"),
    [("   ", "Give the workspace a name."), ("x" * 201, "Use at most 200 characters.")],
)
def test_invalid_name_is_refused_with_its_path(
    people: dict[str, Membership], workspace: Workspace, name: str, message: str
) -> None:
    before = workspace.name
    with pytest.raises(ValidationFailed) as error:
        key_services.workspace_update(
            actor=people[Role.OWNER], name=name, require_approval=True, by=Actor.system("tests")
        )
    assert error.value.issues == [{"path": "name", "message": message}]
    workspace.refresh_from_db()
    assert workspace.name == before and workspace.require_approval is False  # all or nothing


def test_only_the_actors_own_workspace_changes(people: dict[str, Membership]) -> None:
    other = WorkspaceFactory(name="Other")
    key_services.workspace_update(
        actor=people[Role.OWNER], name="Renamed", require_approval=True, by=Actor.system("tests")
    )
    other.refresh_from_db()
    assert other.name == "Other" and other.require_approval is False


def test_api_sees_changes_at_once(
    people: dict[str, Membership], workspace: Workspace, make_key: Callable[..., str]
) -> None:
    client = Api(make_key(workspace))
    before = client.call("GET", "me").json()
    assert before["workspace"]["require_approval"] is False
    assert before["entitlements"]["permanent_inboxes"] is True
    assert before["entitlements"]["classifier"] is True
    key_services.workspace_update(
        actor=people[Role.ADMIN],
        name="Acme Two",
        require_approval=True,
        classifier_enabled=False,
        allow_permanent_inboxes=False,
        by=Actor.system("tests"),
    )
    after = client.call("GET", "me").json()
    assert after["workspace"] == {"id": workspace.pk, "name": "Acme Two", "require_approval": True}
    assert after["entitlements"]["permanent_inboxes"] is False
    assert after["entitlements"]["classifier"] is False
    refused = client.call("POST", "inboxes", {"ttl_minutes": None})
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "feature_disabled"


def test_sends_wait_for_approval_once_the_workspace_requires_it(
    people: dict[str, Membership], workspace: Workspace, make_key: Callable[..., str]
) -> None:
    client = Api(make_key(workspace))
    inbox = client.call("POST", "inboxes", {"local_part": "outgoing"}).json()
    key_services.workspace_update(
        actor=people[Role.OWNER], require_approval=True, by=Actor.system("tests")
    )
    sent = client.call(
        "POST",
        f"inboxes/{inbox['id']}/send",
        {"to": ["someone@example.com"], "subject": "Hello", "text": "Hi"},
    )
    assert sent.status_code == 202
    assert sent.json()["status"] == "pending" and sent.json()["approval_required"] is True
