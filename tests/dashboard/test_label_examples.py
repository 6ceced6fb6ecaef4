"""The email view's "yes / no for this label" buttons in a real browser (issue 31): they record
explicit examples through the same service as ``POST /labels/{key}/examples``, the answer shows
on the page and in ``GET /labels/{key}/examples``, five of them change what the classifier says
about a similar email (``POST /labels/test`` with the session), "Forget" takes one back, and
labels without a question have no buttons."""

from __future__ import annotations

from playwright.sync_api import expect

from apikeys.audit import Actor
from apikeys.models import AuditEntry
from inboxes import services as inbox_services
from labels import services as label_services
from labels.models import LabelFeedback
from mail.pipeline import receive_one
from tests.dashboard.conftest import Team, login
from tests.mail.messages import message

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
SIMILAR = (
    "Work party on Sunday",
    "Plot holders: we need volunteers to clear the communal "
    "paths and fix the fence by the sheds on Sunday.",
)


def _receive(address: str, subject: str, text: str) -> str:
    raw = message(to=address, sender="someone@example.com", subject=subject, text=text)
    return str(receive_one(raw, to=address).email_id)


def _verdict(page, email_id: str) -> dict:  # type: ignore[no-untyped-def]
    """``POST /api/v1/labels/test`` with the signed-in session, as the label editor calls it."""
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.request.post(
        "/api/v1/labels/test",
        data={"email_id": email_id},
        headers={"X-CSRFToken": csrf, "Content-Type": "application/json"},
    )
    assert response.status == 200, response.text()
    return next(r for r in response.json()["results"] if r["key"] == "hobby")


def test_yes_buttons_teach_the_label_and_forget_takes_it_back(page, team: Team, stack) -> None:  # type: ignore[no-untyped-def]
    label_services.label_create(
        workspace=team.workspace,
        key="hobby",
        name="Hobby",
        instructions=QUESTION,
        by=Actor.system("tests"),
    )
    inbox = inbox_services.inbox_create(workspace=team.workspace, local_part="garden")
    ids = [_receive(inbox.address, s, t) for s, t in ALLOTMENT]
    target = _receive(inbox.address, *SIMILAR)
    login(page, "member@acme.test")
    assert _verdict(page, target)["matched"] is False

    for email_id in ids:
        page.goto(f"/emails/{email_id}/")
        row = page.locator('[data-teach="hobby"]')
        expect(row).to_have_attribute("data-answer", "")
        row.get_by_role("button", name="Yes for Hobby").click()
        expect(page.locator('[data-teach="hobby"]')).to_have_attribute("data-answer", "yes")
        expect(page.get_by_role("button", name="Yes for Hobby")).to_have_attribute(
            "aria-pressed", "true"
        )
        expect(page.locator('[data-teach="hobby"]')).to_contain_text("your answer")
    assert (
        LabelFeedback.objects.filter(label__key="hobby", positive=True, source="example").count()
        == 5
    )
    assert AuditEntry.objects.filter(action="label.example_added", actor_type="user").count() == 5
    after = _verdict(page, target)
    assert after["matched"] is True and after["confidence"] >= 0.7, after

    # "No" replaces the answer; "Forget" removes the example, and the verdict goes back.
    page.goto(f"/emails/{ids[0]}/")
    page.get_by_role("button", name="No for Hobby").click()
    expect(page.locator('[data-teach="hobby"]')).to_have_attribute("data-answer", "no")
    for email_id in ids:
        page.goto(f"/emails/{email_id}/")
        page.get_by_role("button", name="Forget the example for Hobby").click()
        expect(page.locator('[data-teach="hobby"]')).to_have_attribute("data-answer", "")
    assert LabelFeedback.objects.filter(label__key="hobby").count() == 0
    assert _verdict(page, target)["matched"] is False


def test_labels_without_a_question_have_no_buttons(page, team: Team, stack) -> None:  # type: ignore[no-untyped-def]
    label_services.label_create(
        workspace=team.workspace, key="todo", name="To do", by=Actor.system("tests")
    )
    inbox = inbox_services.inbox_create(workspace=team.workspace, local_part="plain")
    email_id = _receive(inbox.address, "hello", "hi")
    login(page, "owner@acme.test")
    page.goto(f"/emails/{email_id}/")
    expect(page.get_by_role("list", name="Labels")).to_be_visible()
    assert page.locator("[data-teach]").count() == 0
