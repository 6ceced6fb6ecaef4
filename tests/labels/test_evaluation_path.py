"""The published evaluation measures what the API answers (issue 31): for held-out emails stored
as real messages, with the 5+5 examples given through ``POST /labels/{key}/examples``, ``POST
/labels/test`` gives the same P(yes) as ``python -m tests.labels.evaluate`` computes for them."""

from __future__ import annotations

import json
from email.message import EmailMessage
from email.utils import formataddr, make_msgid

import pytest

from apikeys.models import Workspace
from inboxes import services as inbox_services
from labels.classifier.builtin import BuiltinBackend
from mail import pipeline
from tests.conftest import Api
from tests.labels.evaluate import DEFAULT_EMAILS, Row, load_emails, split_examples

pytestmark = pytest.mark.django_db

HELD_OUT = DEFAULT_EMAILS[1]
QUESTION = "Is this a message written by a person (personal or work), not sent by a system?"


def _raw(row: Row, data: dict, to: str) -> bytes:
    msg = EmailMessage()
    msg["From"] = formataddr((row.email.from_name, row.email.from_address))
    msg["To"] = to
    msg["Subject"] = row.email.subject
    headers = [(n, v) for n, v in data.get("headers", []) if n.lower() != "message-id"]
    ids = [v for n, v in data.get("headers", []) if n.lower() == "message-id"]
    msg["Message-ID"] = ids[0] if ids else make_msgid(domain="example.com")
    if data.get("in_reply_to"):
        msg["In-Reply-To"] = data["in_reply_to"]
    for name, value in headers:
        msg[name] = value
    msg.set_content(row.email.text)
    if data.get("html"):
        msg.add_alternative(f"<p>{row.email.text}</p>", subtype="html")
    return msg.as_bytes()


def test_the_endpoint_answers_what_the_evaluation_scores(api: Api, workspace: Workspace) -> None:
    rows = load_emails(HELD_OUT)
    data = {
        json.loads(line)["id"]: json.loads(line)
        for line in HELD_OUT.read_text(encoding="utf-8").splitlines()
        if line.strip()
    }
    examples, rest = split_examples(rows, "person")
    chosen = [r for r in rows if r.id not in {x.id for x in rest}]
    scored = rest[:12]
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="held-out")
    stored = {
        row.id: str(
            pipeline.receive_one(_raw(row, data[row.id], inbox.address), to=inbox.address).email_id
        )
        for row in [*chosen, *scored]
    }
    api.call("POST", "labels", {"key": "person", "name": "Person", "instructions": QUESTION})
    for row in chosen:
        answer = "yes" if row.labels["person"] else "no"
        body = {"email_id": stored[row.id], "answer": answer}
        assert api.call("POST", "labels/person/examples", body).status_code == 200

    backend = BuiltinBackend()
    for row in scored:
        verdict = backend.classify(question=QUESTION, email=row.email, examples=examples)
        p_yes = verdict.confidence if verdict.answer else 1 - verdict.confidence
        results = api.call("POST", "labels/test", {"email_id": stored[row.id]}).json()["results"]
        served = next(r for r in results if r["key"] == "person")
        assert served["source"] == "classifier"
        assert served["confidence"] == pytest.approx(p_yes, abs=1e-4), row.id
