"""Faults on demand (an inbox's ``smtp_faults``): set through the API, seen by a real SMTP client
(smtplib against our front door), counted in ``injected_faults`` and recorded as ``mail.rejected``
with ``injected: true``; counting of ``first`` and ``greylist`` shared by smtpd processes."""

from __future__ import annotations

import smtplib
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from apikeys.models import Workspace
from events.models import Event
from inboxes.models import Inbox
from mail.models import Email
from mail.realtime import stream_payload
from tests.conftest import Api, SmtpServer, error_of
from tests.live import Process, child_env, embedded, free_port
from tests.mail.messages import message

RETRY = "451 4.7.1 Try again later"


def _create(api: Api, local_part: str, faults: list[dict[str, Any]]) -> dict[str, Any]:
    response = api.call("POST", "inboxes", {"local_part": local_part, "smtp_faults": faults})
    assert response.status_code == 200, response.json()
    return response.json()


def _send(port: int, to: str, *, mail_from: str = "app@example.org", subject: str = "s") -> None:
    with smtplib.SMTP("127.0.0.1", port, timeout=60) as smtp:
        smtp.sendmail(mail_from, [to], message(to=to, subject=subject))


def _injected(inbox_id: str) -> list[dict[str, Any]]:
    return [
        event.data
        for event in Event.objects.filter(inbox_id=inbox_id, type="mail.rejected").order_by("id")
        if event.data.get("injected")
    ]


def _count(inbox_id: str) -> int:
    return Inbox.objects.unscoped().get(pk=inbox_id).injected_faults


# --- the API -------------------------------------------------------------------------------------


def test_faults_are_set_on_create_and_patch_and_shown(api: Api) -> None:
    body = _create(api, "chaos", [{"stage": "rcpt", "reply": RETRY}])
    assert body["smtp_faults"] == [
        {"stage": "rcpt", "reply": RETRY, "mode": "always", "delay_ms": 0}
    ]
    assert body["injected_faults"] == 0
    faults = [
        {"stage": "data", "reply": "554 5.7.1 Go away", "mode": "probability", "probability": 0.5},
        {"stage": "rcpt", "reply": RETRY, "mode": "first", "count": 2, "delay_ms": 250},
        {"stage": "rcpt", "reply": "450 4.2.0 Greylisted", "mode": "greylist"},
    ]
    response = api.call("PATCH", f"inboxes/{body['id']}", {"smtp_faults": faults})
    assert response.status_code == 200, response.json()
    assert response.json()["smtp_faults"] == [
        {**faults[0], "delay_ms": 0},
        faults[1],
        {**faults[2], "window_seconds": 300, "delay_ms": 0},
    ]
    shown = api.call("GET", f"inboxes/{body['id']}").json()
    assert shown["smtp_faults"] == response.json()["smtp_faults"]
    cleared = api.call("PATCH", f"inboxes/{body['id']}", {"smtp_faults": []}).json()
    assert cleared["smtp_faults"] == []


@pytest.mark.parametrize(
    ("faults", "path"),
    [
        ([{"stage": "rcpt", "reply": "250 2.0.0 OK"}], "smtp_faults.0.reply"),
        ([{"stage": "rcpt", "reply": "451 Try again later"}], "smtp_faults.0.reply"),
        ([{"stage": "rcpt", "reply": "451 5.7.1 Mixed classes"}], "smtp_faults.0.reply"),
        ([{"stage": "rcpt", "reply": "451 4.7.1 Two\r\nlines"}], "smtp_faults.0.reply"),
        ([{"stage": "helo", "reply": RETRY}], "smtp_faults.0.stage"),
        ([{"stage": "rcpt"}], "smtp_faults.0.reply"),
        (
            [{"stage": "rcpt", "reply": RETRY}, {"stage": "rcpt", "reply": RETRY, "mode": "x"}],
            "smtp_faults.1.mode",
        ),
        (
            [
                {"stage": "rcpt", "reply": RETRY},
                {"stage": "data", "reply": RETRY, "mode": "probability"},
            ],
            "smtp_faults.1.probability",
        ),
        (
            [{"stage": "rcpt", "reply": RETRY, "mode": "probability", "probability": 1.5}],
            "smtp_faults.0.probability",
        ),
        ([{"stage": "rcpt", "reply": RETRY, "mode": "first", "count": 0}], "smtp_faults.0.count"),
        ([{"stage": "rcpt", "reply": RETRY, "count": 3}], "smtp_faults.0.count"),
        (
            [{"stage": "rcpt", "reply": RETRY, "mode": "greylist", "window_seconds": "60"}],
            "smtp_faults.0.window_seconds",
        ),
        ([{"stage": "rcpt", "reply": RETRY, "delay_ms": 30_001}], "smtp_faults.0.delay_ms"),
        ([{"stage": "rcpt", "reply": RETRY}] * 11, "smtp_faults"),
        ({"stage": "rcpt"}, "smtp_faults"),
        (["451 4.7.1 x"], "smtp_faults.0"),
    ],
)
def test_invalid_faults_name_the_offending_path(api: Api, faults: Any, path: str) -> None:
    response = api.call("POST", "inboxes", {"local_part": "bad", "smtp_faults": faults})
    assert error_of(response) == (400, "validation_error")
    assert [issue["path"] for issue in response.json()["error"]["issues"]] == [path]
    inbox = _create(api, "good", [])
    response = api.call("PATCH", f"inboxes/{inbox['id']}", {"smtp_faults": faults})
    assert error_of(response) == (400, "validation_error")
    assert [issue["path"] for issue in response.json()["error"]["issues"]] == [path]
    assert api.call("GET", f"inboxes/{inbox['id']}").json()["smtp_faults"] == []


def test_a_key_without_write_cannot_set_faults(
    api: Api, workspace: Workspace, make_key: Callable[..., str]
) -> None:
    inbox = _create(api, "guarded", [])
    reader = Api(make_key(workspace, scopes=("read",)))
    faults = [{"stage": "rcpt", "reply": RETRY}]
    assert error_of(reader.call("PATCH", f"inboxes/{inbox['id']}", {"smtp_faults": faults})) == (
        403,
        "insufficient_scope",
    )
    created = reader.call("POST", "inboxes", {"smtp_faults": faults})
    assert error_of(created) == (403, "insufficient_scope")
    assert Inbox.objects.unscoped().get(pk=inbox["id"]).smtp_faults == []
    assert reader.call("GET", f"inboxes/{inbox['id']}").json()["smtp_faults"] == []


def test_another_workspaces_inbox_is_not_found(api: Api, other_api: Api) -> None:
    inbox = _create(api, "mine", [])
    faults = [{"stage": "rcpt", "reply": RETRY}]
    for target in (inbox["id"], inbox["address"]):
        response = other_api.call("PATCH", f"inboxes/{target}", {"smtp_faults": faults})
        assert error_of(response) == (404, "not_found")
    assert Inbox.objects.unscoped().get(pk=inbox["id"]).smtp_faults == []


# --- over SMTP -----------------------------------------------------------------------------------


def test_always_at_rcpt_gives_the_configured_reply(smtp_server: SmtpServer, api: Api) -> None:
    inbox = _create(api, "always", [{"stage": "rcpt", "reply": "421 4.3.2 Closing for tests"}])
    with pytest.raises(smtplib.SMTPRecipientsRefused) as refused:
        _send(smtp_server.port, inbox["address"])
    assert refused.value.recipients == {inbox["address"]: (421, b"4.3.2 Closing for tests")}
    assert _count(inbox["id"]) == 1
    [event] = _injected(inbox["id"])
    assert event["injected"] is True and event["code"] == 421 and event["stage"] == "rcpt"
    assert event["reason"] == "Closing for tests" and event["from"] == "app@example.org"
    assert event["mode"] == "always"
    payload = stream_payload("mail.rejected", inbox["id"], event, 1)
    assert payload["injected"] is True and payload["code"] == 421
    assert not Email.objects.filter(inbox_id=inbox["id"]).exists()


def test_always_at_data_gives_the_configured_reply(smtp_server: SmtpServer, api: Api) -> None:
    inbox = _create(api, "datafault", [{"stage": "data", "reply": "554 5.7.1 Refused for tests"}])
    with pytest.raises(smtplib.SMTPDataError) as refused:
        _send(smtp_server.port, inbox["address"])
    assert (refused.value.smtp_code, refused.value.smtp_error) == (554, b"5.7.1 Refused for tests")
    assert _count(inbox["id"]) == 1
    assert [e["stage"] for e in _injected(inbox["id"])] == ["data"]
    assert not Email.objects.filter(inbox_id=inbox["id"]).exists()


def test_a_data_fault_of_one_inbox_leaves_the_others_their_mail(
    smtp_server: SmtpServer, api: Api
) -> None:
    faulty = _create(api, "faulty", [{"stage": "data", "reply": RETRY}])
    plain = _create(api, "plain", [])
    with smtplib.SMTP("127.0.0.1", smtp_server.port, timeout=60) as smtp:
        smtp.sendmail("app@example.org", [faulty["address"], plain["address"]], message(to="x"))
    assert Email.objects.filter(inbox_id=plain["id"]).count() == 1
    assert not Email.objects.filter(inbox_id=faulty["id"]).exists()
    assert _count(faulty["id"]) == 1 and _count(plain["id"]) == 0


def test_probability_one_always_faults_and_zero_never(smtp_server: SmtpServer, api: Api) -> None:
    rule = {"stage": "rcpt", "reply": RETRY, "mode": "probability"}
    sure = _create(api, "sure", [{**rule, "probability": 1}])
    never = _create(api, "never", [{**rule, "probability": 0}])
    for _ in range(3):
        with pytest.raises(smtplib.SMTPRecipientsRefused):
            _send(smtp_server.port, sure["address"])
        _send(smtp_server.port, never["address"])
    assert _count(sure["id"]) == 3 and _count(never["id"]) == 0
    assert Email.objects.filter(inbox_id=never["id"]).count() == 3


def test_probability_half_faults_some_attempts(smtp_server: SmtpServer, api: Api) -> None:
    rule = {"stage": "rcpt", "reply": RETRY, "mode": "probability", "probability": 0.5}
    inbox = _create(api, "coin", [rule])
    outcomes = []
    with smtplib.SMTP("127.0.0.1", smtp_server.port, timeout=60) as smtp:
        smtp.ehlo()
        for _ in range(60):  # each RCPT is one attempt; 60 heads or 60 tails: 2 in 10^18
            smtp.mail("app@example.org")
            outcomes.append(smtp.rcpt(inbox["address"])[0])
            smtp.rset()
    assert set(outcomes) == {250, 451}
    assert _count(inbox["id"]) == outcomes.count(451)


def test_first_faults_count_attempts_then_passes(smtp_server: SmtpServer, api: Api) -> None:
    inbox = _create(api, "first", [{"stage": "rcpt", "reply": RETRY, "mode": "first", "count": 2}])
    for attempt in (1, 2):
        with pytest.raises(smtplib.SMTPRecipientsRefused) as refused:
            _send(smtp_server.port, inbox["address"], subject=f"try {attempt}")
        assert refused.value.recipients[inbox["address"]][0] == 451
    _send(smtp_server.port, inbox["address"], subject="try 3")
    _send(smtp_server.port, inbox["address"], subject="try 4")
    subjects = sorted(Email.objects.filter(inbox_id=inbox["id"]).values_list("subject", flat=True))
    assert subjects == ["try 3", "try 4"]
    assert _count(inbox["id"]) == 2 and len(_injected(inbox["id"])) == 2


def test_greylist_defers_the_first_attempt_of_each_pair(smtp_server: SmtpServer, api: Api) -> None:
    rule = {"stage": "rcpt", "reply": "450 4.2.0 Greylisted, retry", "mode": "greylist"}
    inbox = _create(api, "grey", [rule])
    for sender in ("one@example.org", "two@example.org"):
        with pytest.raises(smtplib.SMTPRecipientsRefused) as refused:
            _send(smtp_server.port, inbox["address"], mail_from=sender, subject=f"{sender} 1")
        assert refused.value.recipients[inbox["address"]] == (450, b"4.2.0 Greylisted, retry")
        _send(smtp_server.port, inbox["address"], mail_from=sender, subject=f"{sender} 2")
    subjects = sorted(Email.objects.filter(inbox_id=inbox["id"]).values_list("subject", flat=True))
    assert subjects == ["one@example.org 2", "two@example.org 2"]
    assert [e["from"] for e in _injected(inbox["id"])] == ["one@example.org", "two@example.org"]
    assert _count(inbox["id"]) == 2


def test_a_delayed_fault_does_not_hold_up_other_sessions(smtp_server: SmtpServer, api: Api) -> None:
    slow = _create(api, "slow", [{"stage": "rcpt", "reply": RETRY, "delay_ms": 3000}])
    fast = _create(api, "fast", [])
    order: list[str] = []
    started = threading.Event()

    def slow_session() -> None:
        with smtplib.SMTP("127.0.0.1", smtp_server.port, timeout=60) as smtp:
            smtp.ehlo()
            smtp.mail("app@example.org")
            started.set()
            code, _ = smtp.rcpt(slow["address"])
            order.append(f"slow {code}")

    thread = threading.Thread(target=slow_session)
    thread.start()
    assert started.wait(30)
    _send(smtp_server.port, fast["address"])  # served while the slow reply is held back
    order.append("fast 250")
    thread.join(60)
    assert order == ["fast 250", "slow 451"]
    assert _count(slow["id"]) == 1


def test_data_faults_on_many_inboxes_hold_the_reply_once(smtp_server: SmtpServer, api: Api) -> None:
    """Five inboxes with a 3 s DATA delay each: the reply waits the longest delay once (3 s),
    not one after another (15 s), so it comes before a timer of 10 s started with the DATA."""
    rule = {"stage": "data", "reply": RETRY, "delay_ms": 3000}
    inboxes = [_create(api, f"held{n}", [rule]) for n in range(5)]
    timer_fired = threading.Event()
    order: list[str] = []
    with smtplib.SMTP("127.0.0.1", smtp_server.port, timeout=60) as smtp:
        smtp.ehlo()
        smtp.mail("app@example.org")
        for inbox in inboxes:
            assert smtp.rcpt(inbox["address"])[0] == 250
        timer = threading.Timer(10, lambda: (order.append("timer"), timer_fired.set()))
        timer.start()
        try:
            code, _ = smtp.data(message(to=inboxes[0]["address"]))
            order.append(f"data {code}")
        finally:
            timer.cancel()
    assert order == ["data 451"]
    assert not timer_fired.is_set()
    assert [_count(inbox["id"]) for inbox in inboxes] == [1] * 5


@pytest.fixture
def two_receivers(transactional_db: None) -> Any:
    """Two smtpd processes on one port (SO_REUSEPORT) in the PostgreSQL pass (they count in
    Redis); one in the embedded pass, where counting is in the process's memory."""
    from django.db import connection

    port = free_port()
    env = child_env(connection.settings_dict["NAME"])
    argv = [sys.executable, "manage.py", "smtpd", "--host", "127.0.0.1", "--port", str(port)]
    processes = [Process(argv, port, env).start()]
    if not embedded():
        processes.append(Process(argv, port, env).start())
    yield port
    for process in processes:
        process.stop()


@pytest.mark.live
def test_first_and_greylist_count_across_smtpd_processes(two_receivers: int, api: Api) -> None:
    first = _create(
        api, "first-shared", [{"stage": "rcpt", "reply": RETRY, "mode": "first", "count": 3}]
    )
    grey = _create(api, "grey-shared", [{"stage": "data", "reply": RETRY, "mode": "greylist"}])
    refused = 0
    for attempt in range(8):  # new connections: spread over the processes by the kernel
        try:
            _send(two_receivers, first["address"], subject=f"f{attempt}")
        except smtplib.SMTPRecipientsRefused:
            refused += 1
    assert refused == 3
    assert Email.objects.filter(inbox_id=first["id"]).count() == 5
    for n in range(6):
        sender = f"s{n}@example.org"
        with pytest.raises(smtplib.SMTPDataError):
            _send(two_receivers, grey["address"], mail_from=sender)
        _send(two_receivers, grey["address"], mail_from=sender)  # the retry passes anywhere
    assert Email.objects.filter(inbox_id=grey["id"]).count() == 6
    assert _count(first["id"]) == 3 and _count(grey["id"]) == 6


# --- the dashboard -------------------------------------------------------------------------------


def test_the_dashboard_inbox_page_shows_and_edits_faults(
    api: Api, workspace: Workspace, other_workspace: Workspace
) -> None:
    from django.test import Client

    from tests.factories import MembershipFactory

    inbox = _create(api, "dash", [{"stage": "rcpt", "reply": RETRY, "mode": "first", "count": 2}])
    Inbox.objects.unscoped().filter(pk=inbox["id"]).update(injected_faults=7)
    client = Client()
    client.force_login(MembershipFactory(workspace=workspace, role="member").user)
    page = client.get(f"/inboxes/{inbox['id']}/").content.decode()
    assert "SMTP faults" in page and '<strong class="injected-faults">7</strong>' in page
    assert "451 4.7.1 Try again later</span>, first (2 attempts)" in page
    url = f"/inboxes/{inbox['id']}/smtp-faults/"
    rules = '[{"stage": "data", "reply": "552 5.2.2 Full for tests", "delay_ms": 10}]'
    response = client.post(url, {"smtp_faults": rules}, follow=True)
    assert response.status_code == 200
    assert Inbox.objects.unscoped().get(pk=inbox["id"]).smtp_faults == [
        {"stage": "data", "reply": "552 5.2.2 Full for tests", "mode": "always", "delay_ms": 10}
    ]
    assert "552 5.2.2 Full for tests</span>, always, after 10 ms" in response.content.decode()
    bad = client.post(url, {"smtp_faults": '[{"stage": "rcpt", "reply": "hello"}]'}, follow=True)
    assert "smtp_faults.0.reply: Use a 4xx or 5xx code" in bad.content.decode()
    broken = client.post(url, {"smtp_faults": "[{"}, follow=True)
    assert "Not JSON" in broken.content.decode()
    assert Inbox.objects.unscoped().get(pk=inbox["id"]).smtp_faults[0]["stage"] == "data"
    outsider = Client()
    outsider.force_login(MembershipFactory(workspace=other_workspace, role="owner").user)
    assert outsider.post(url, {"smtp_faults": "[]"}).status_code == 404
    assert outsider.get(f"/inboxes/{inbox['id']}/").status_code == 404
    assert len(Inbox.objects.unscoped().get(pk=inbox["id"]).smtp_faults) == 1
    cleared = client.post(url, {"smtp_faults": ""}, follow=True)
    assert Inbox.objects.unscoped().get(pk=inbox["id"]).smtp_faults == []
    assert "No faults: mail is answered normally." in cleared.content.decode()
