"""POST/GET /labels/{key}/examples and DELETE /labels/{key}/examples/{id} (issue 31): explicit
yes / no examples change the next answer for a similar email and removing them changes it back;
another workspace's examples never count; scope, tenancy, validation and the audit log."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from apikeys.models import AuditEntry, Workspace
from inboxes import services as inbox_services
from inboxes.models import Inbox
from labels.models import Label, LabelFeedback
from mail import pipeline
from tests.conftest import Api, error_of
from tests.mail.messages import message

pytestmark = pytest.mark.django_db

# A question the lexicon knows nothing about: zero-shot the answer is "no" for every email.
QUESTION = "Is this about my hobby?"

ALLOTMENT = [
    (
        "Plot inspection next month",
        "Dear plot holders, the committee will inspect all plots "
        "on 12 May. Please clear weeds from paths and make sure your shed is tidy.",
    ),
    (
        "water trough on plot 14",
        "Hi, the water trough near plot 14 is leaking again. Could "
        "someone from the committee have a look? Thanks, Maria",
    ),
    (
        "Annual rent for your plot",
        "Your allotment plot rent for the coming year is due by "
        "1 October. The committee thanks you for keeping the site tidy.",
    ),
    (
        "compost delivery",
        "The manure and compost delivery for the allotments arrives Saturday, "
        "bring a wheelbarrow to the gate by the sheds.",
    ),
    (
        "Seed swap at the allotment hut",
        "Join us at the allotment hut for our spring seed swap. "
        "Bring spare seeds and seedlings for your plot neighbours.",
    ),
]
OTHER = [
    ("Summer sale", "Up to 50% off everything this weekend."),
    ("Your statement", "Your monthly statement is ready to view online."),
    ("dinner friday?", "hey are you free for dinner on friday?"),
    ("PR merged", "Your pull request #12 was merged into main."),
    ("Your order shipped", "Your order is on its way."),
]
SIMILAR = (
    "Work party on Sunday",
    "Plot holders: we need volunteers to clear the communal "
    "paths and fix the fence by the sheds on Sunday.",
)


def _receive(workspace: Workspace, subject: str, text: str) -> str:
    inbox = Inbox.objects.filter(workspace=workspace).first() or inbox_services.inbox_create(
        workspace=workspace, local_part=f"garden-{workspace.pk[-6:]}"
    )
    raw = message(to=inbox.address, sender="someone@example.com", subject=subject, text=text)
    return str(pipeline.receive_one(raw, to=inbox.address).email_id)


def _label(api: Api) -> None:
    api.call("POST", "labels", {"key": "hobby", "name": "Hobby", "instructions": QUESTION})


def _answer(api: Api, email_id: str) -> dict:
    results = api.call("POST", "labels/test", {"email_id": email_id}).json()["results"]
    return next(r for r in results if r["key"] == "hobby")


def test_examples_change_the_next_answer_and_removing_them_changes_it_back(
    api: Api, workspace: Workspace
) -> None:
    _label(api)
    yes_ids = [_receive(workspace, s, t) for s, t in ALLOTMENT]
    target = _receive(workspace, *SIMILAR)
    before = _answer(api, target)
    assert before["matched"] is False and before["source"] == "classifier"

    created = [
        api.call("POST", "labels/hobby/examples", {"email_id": i, "answer": "yes"}).json()
        for i in yes_ids
    ]
    assert {c["answer"] for c in created} == {"yes"} and {c["source"] for c in created} == {
        "example"
    }
    assert all(c["id"].startswith("lex_") for c in created)
    # Five consistent yes examples carry a similar email over the label's threshold (0.7).
    after = _answer(api, target)
    assert after["matched"] is True and after["confidence"] >= 0.7, after

    listed = api.call("GET", "labels/hobby/examples").json()
    assert [e["id"] for e in listed["data"]] == [c["id"] for c in reversed(created)]
    assert listed["next_cursor"] is None
    first = api.call("GET", "labels/hobby/examples", {"limit": 3}).json()
    rest = api.call(
        "GET", "labels/hobby/examples", {"limit": 3, "cursor": first["next_cursor"]}
    ).json()
    assert [e["id"] for e in first["data"] + rest["data"]] == [e["id"] for e in listed["data"]]
    assert rest["next_cursor"] is None

    for c in created:
        response = api.call("DELETE", f"labels/hobby/examples/{c['id']}")
        assert response.json() == {"deleted": True, "id": c["id"]}
    assert api.call("GET", "labels/hobby/examples").json()["data"] == []
    assert _answer(api, target) == before


def test_a_no_example_turns_a_yes_around_and_keeps_the_label_off(
    api: Api, workspace: Workspace
) -> None:
    _label(api)
    yes_ids = [_receive(workspace, s, t) for s, t in ALLOTMENT]
    for i in yes_ids:
        api.call("POST", "labels/hobby/examples", {"email_id": i, "answer": "yes"})
    target = _receive(workspace, *SIMILAR)
    assert _answer(api, target)["matched"] is True
    # The same email told "no": the latest decision about an email replaces the earlier one.
    first = yes_ids[0]
    no = api.call("POST", "labels/hobby/examples", {"email_id": first, "answer": "no"}).json()
    assert no["answer"] == "no"
    rows = LabelFeedback.objects.filter(label__key="hobby", email_id=first)
    assert rows.count() == 1 and rows.get().positive is False
    # Negative examples of sale mail: an unrelated email stays "no".
    for subject, text in OTHER:
        other_id = _receive(workspace, subject, text)
        api.call("POST", "labels/hobby/examples", {"email_id": other_id, "answer": "no"})
    unrelated = _receive(workspace, "Flash sale", "Up to 50% off everything, this weekend only.")
    assert _answer(api, unrelated)["matched"] is False


def test_another_workspaces_examples_never_influence_an_answer(
    api: Api, other_api: Api, workspace: Workspace, other_workspace: Workspace
) -> None:
    _label(api)
    _label(other_api)
    target = _receive(workspace, *SIMILAR)
    before = _answer(api, target)
    for subject, text in ALLOTMENT:
        other_id = _receive(other_workspace, subject, text)
        response = other_api.call(
            "POST", "labels/hobby/examples", {"email_id": other_id, "answer": "yes"}
        )
        assert response.status_code == 200
    assert _answer(api, target) == before
    assert api.call("GET", "labels/hobby/examples").json()["data"] == []
    # and the other workspace's own similar email is now a yes
    theirs = _receive(other_workspace, *SIMILAR)
    assert _answer(other_api, theirs)["matched"] is True


def test_scope_tenancy_and_validation(
    api: Api,
    other_api: Api,
    workspace: Workspace,
    other_workspace: Workspace,
    make_key: Callable[..., str],
) -> None:
    _label(api)
    _label(other_api)
    mine = _receive(workspace, "hello", "hi")
    theirs = _receive(other_workspace, "hello", "hi")
    reader, sender, writer = (Api(make_key(workspace, (s,))) for s in ("read", "send", "write"))

    response = reader.call("POST", "labels/hobby/examples", {"email_id": mine, "answer": "yes"})
    assert error_of(response) == (403, "insufficient_scope")
    response = sender.call("GET", "labels/hobby/examples")
    assert error_of(response) == (403, "insufficient_scope")
    created = writer.call("POST", "labels/hobby/examples", {"email_id": mine, "answer": "yes"})
    assert created.status_code == 200
    example_id = created.json()["id"]
    assert reader.call("GET", "labels/hobby/examples").status_code == 200
    response = reader.call("DELETE", f"labels/hobby/examples/{example_id}")
    assert error_of(response) == (403, "insufficient_scope")
    assert error_of(Api().call("GET", "labels/hobby/examples")) == (401, "unauthorized")

    # another workspace's email, label or example: 404, nothing stored, nothing removed
    response = api.call("POST", "labels/hobby/examples", {"email_id": theirs, "answer": "yes"})
    assert error_of(response) == (404, "not_found")
    response = other_api.call("DELETE", f"labels/hobby/examples/{example_id}")
    assert error_of(response) == (404, "not_found")
    response = api.call("GET", "labels/ghost/examples")
    assert error_of(response) == (404, "not_found")
    api.call("POST", "labels", {"key": "other", "name": "Other"})
    response = api.call("DELETE", f"labels/other/examples/{example_id}")
    assert error_of(response) == (404, "not_found")  # an example of another label
    assert LabelFeedback.objects.count() == 1

    for body, path in (
        ({"email_id": mine, "answer": "maybe"}, "answer"),
        ({"email_id": mine, "answer": True}, "answer"),
        ({"answer": "yes"}, "email_id"),
        ({"email_id": 7, "answer": "yes"}, "email_id"),
    ):
        response = api.call("POST", "labels/hobby/examples", body)
        assert error_of(response) == (400, "validation_error"), body
        assert path in {i["path"] for i in response.json()["error"]["issues"]}, body
    response = api.call("GET", "labels/hobby/examples", {"cursor": "bogus"})
    assert error_of(response) == (400, "validation_error")


def test_manual_labels_and_removals_are_listed_and_keep_counting(
    api: Api, workspace: Workspace
) -> None:
    _label(api)
    labelled = _receive(workspace, "Seed swap", "Bring seeds to the allotment hut.")
    explicit = _receive(workspace, "Plot rent", "Your allotment plot rent is due.")
    api.call("PATCH", f"emails/{labelled}", {"labels": ["hobby"]})
    api.call("POST", "labels/hobby/examples", {"email_id": explicit, "answer": "yes"})
    listed = api.call("GET", "labels/hobby/examples").json()["data"]
    assert [(e["email_id"], e["source"], e["answer"]) for e in listed] == [
        (explicit, "example", "yes"),
        (labelled, "label", "yes"),
    ]
    # Taking a manual label off forgets the example it made, not the explicit ones.
    api.call("PATCH", f"emails/{labelled}", {"labels": []})
    assert [e["email_id"] for e in api.call("GET", "labels/hobby/examples").json()["data"]] == [
        explicit
    ]
    # Removing an example leaves the email's labels alone.
    api.call("PATCH", f"emails/{explicit}", {"labels": ["hobby"]})  # replaces: now "label"
    example = api.call("GET", "labels/hobby/examples").json()["data"][0]
    assert example["source"] == "label"
    api.call("DELETE", f"labels/hobby/examples/{example['id']}")
    labels = api.call("GET", f"emails/{explicit}").json()["labels"]
    assert [x["key"] for x in labels] == ["hobby"]
    actions = list(
        AuditEntry.objects.filter(workspace=workspace, action__startswith="label.example")
        .order_by("id")
        .values_list("action", "changes")
    )
    assert actions == [
        ("label.example_added", {"example": {"after": f"{explicit}: yes"}}),
        ("label.example_removed", {"example": {"before": f"{explicit}: yes"}}),
    ]
    assert Label.objects.get(key="hobby").feedback.count() == 0
