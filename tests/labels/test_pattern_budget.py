"""Label rules and the label tester on the bounded matcher (issue 23, item 1): however many
labels and regex conditions a workspace has, one email's rules (on receipt, and in the tester)
share one matching budget, and a pattern that would unroll into a huge program is refused."""

from __future__ import annotations

import logging
import time

import pytest

from apikeys.audit import Actor
from apikeys.models import Workspace
from inboxes import services as inbox_services
from labels import services as label_services
from labels.models import EmailLabel
from mail import pipeline
from tests.conftest import Api, error_of
from tests.mail.messages import message

pytestmark = pytest.mark.django_db

LABELS = 20
CONDITIONS = 10  # per label: 200 catastrophic searches, 10 s at 50 ms each without a budget
SUBJECT = "a" * 40 + "!"
CATASTROPHIC = {
    "match": "any",
    "conditions": [{"field": "subject", "op": "regex", "value": r"^(a|aa)+$"}] * CONDITIONS,
}


@pytest.fixture
def catastrophic_labels(workspace: Workspace) -> None:
    for n in range(LABELS):
        label_services.label_create(
            workspace=workspace,
            key=f"slow-{n}",
            name=f"Slow {n}",
            rules=CATASTROPHIC,
            by=Actor.system("tests"),
        )


def _searches_stopped(caplog: pytest.LogCaptureFixture) -> int:
    """Searches run to their time limit; one budget lets at most 250 / 50 of them run."""
    assert caplog.text.count("pattern budget spent") == 1
    return caplog.text.count("timed out after")


def test_receipt_spends_a_bounded_moment_on_rules(
    workspace: Workspace, catastrophic_labels: None, caplog: pytest.LogCaptureFixture
) -> None:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="rules")
    caplog.set_level(logging.WARNING, logger="pigeonhole.patterns")
    started = time.monotonic()
    delivery = pipeline.receive_one(message(to=inbox.address, subject=SUBJECT), to=inbox.address)
    assert time.monotonic() - started < 2.0  # loosely: the budget is 250 ms (unbounded: 10 s)
    assert 1 <= _searches_stopped(caplog) <= 6  # of LABELS x CONDITIONS = 200
    assert delivery.email_id is not None
    assert not EmailLabel.objects.filter(email_id=delivery.email_id).exists()  # no match


def test_tester_spends_a_bounded_moment_and_says_why(
    api: Api, catastrophic_labels: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="pigeonhole.patterns")
    started = time.monotonic()
    response = api.call("POST", "labels/test", {"subject": SUBJECT})
    assert time.monotonic() - started < 2.0  # loosely: the budget is 250 ms (unbounded: 10 s)
    assert 1 <= _searches_stopped(caplog) <= 6  # of LABELS x CONDITIONS = 200
    results = response.json()["results"]
    assert len(results) == LABELS and not any(result["matched"] for result in results)
    assert all("regex timed out on subject" in result["reason"] for result in results)


@pytest.mark.parametrize("pattern", ["((((a{100}){100}){100}){100})", "(?:(?:[ab]{50}){50}){50}"])
def test_a_pattern_that_unrolls_into_a_huge_program_is_refused(api: Api, pattern: str) -> None:
    rules = {"conditions": [{"field": "subject", "op": "regex", "value": pattern}]}
    response = api.call("POST", "labels", {"key": "bomb", "name": "Bomb", "rules": rules})
    assert error_of(response) == (400, "validation_error")
    issue = response.json()["error"]["issues"][0]
    assert issue["path"] == "rules.conditions.0.value"
    assert "repeat counts multiply" in issue["message"]
