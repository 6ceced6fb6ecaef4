"""The webhooks pages in a real browser: creating an endpoint, its secret shown once, the test
event and replay going through a real Celery worker to a real HTTP receiver on 127.0.0.1 (whose
signatures we verify independently), the delivery log with every attempt, edits, and members
kept to reading.

This module runs its own stack: the web process must allow private webhook targets
(``WEBHOOK_ALLOW_PRIVATE_TARGETS=true``, as tests/webhooks do) and hand deliveries to a worker
(``CELERY_TASK_ALWAYS_EAGER=false`` on a queue of its own), so it overrides ``stack``. In the
embedded configuration ``manage.py serve`` delivers in-process, as ``make run`` does.
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import stripe
from playwright.sync_api import expect

from apikeys.audit import Actor
from tests.dashboard.conftest import (
    PHONE,
    Team,
    allow_console_error,
    horizontal_overflow,
    login,
    screenshot,
)
from tests.live import CELERY_WORKER, ROOT, Stack, drain, embedded
from tests.webhooks.receiver import Receiver, receiver  # noqa: F401  (a fixture)
from webhooks import services as webhook_services
from webhooks.models import Delivery, Endpoint


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker: Any) -> Iterator[Stack]:
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"])
    extra = {
        "WEBHOOK_ALLOW_PRIVATE_TARGETS": "true",
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "CELERY_QUEUE": f"dash-webhooks-{uuid.uuid4().hex[:8]}",
    }
    if embedded():  # manage.py serve delivers in-process: no worker
        extra["CELERY_TASK_ALWAYS_EAGER"] = "true"
    for process in (running.web, running.smtp):
        process.env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        process.env.update(extra)
    if embedded():
        running.start()
        yield running
        running.stop()
        return
    worker = subprocess.Popen(
        CELERY_WORKER,
        cwd=ROOT,
        env=dict(running.web.env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    worker_logs: collections.deque[str] = collections.deque(maxlen=300)
    assert worker.stderr is not None
    drain(worker.stderr, worker_logs)
    running.start()
    yield running
    running.stop()
    worker.terminate()
    try:
        worker.wait(10)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait(10)


def _readme_verify(raw_body: bytes, header: str, secret: str, tolerance: int = 300) -> bool:
    """The receiver's check from docs/webhooks.md, verbatim."""
    parts = dict(item.split("=", 1) for item in header.split(","))
    t, v1 = parts["t"], parts["v1"]
    expected = hmac.new(secret.encode(), f"{t}.".encode() + raw_body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, v1) and abs(time.time() - int(t)) < tolerance


def _create(page: Any, url: str, *, events: tuple[str, ...] = ()) -> str:
    page.goto("/webhooks/new/")
    page.get_by_label("URL").fill(url)
    for event in events:
        page.get_by_label(event, exact=False).first.check()
    page.get_by_role("button", name="Create endpoint").click()
    expect(page.get_by_role("status")).to_have_text(f"Endpoint {url} created.")
    return page.url.rstrip("/").rsplit("/", 1)[-1]


def test_secret_once_test_event_and_replay(page: Any, team: Team, receiver: Receiver) -> None:  # noqa: F811
    login(page, "owner@acme.test")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Webhooks").click()
    expect(page.locator(".empty")).to_contain_text("No webhook endpoints yet.")
    page.get_by_role("link", name="New endpoint").click()
    expect(page.get_by_label("email.received", exact=False)).to_be_checked()  # the default
    endpoint_id = _create(page, receiver.url, events=("inbox.created",))
    endpoint = Endpoint.objects.get(pk=endpoint_id, workspace=team.workspace)
    assert endpoint.events == ["email.received", "inbox.created"] and endpoint.enabled

    # The secret, once, with a copy button.
    secret = page.locator("[data-secret]").inner_text()
    assert secret.startswith("whsec_")
    expect(page.get_by_role("button", name="Copy secret")).to_have_attribute("data-copy", secret)
    expect(page.locator("#deliveries")).to_contain_text("No deliveries yet.")

    page.get_by_role("button", name="Send test event").click()
    expect(page.get_by_role("status")).to_contain_text("Test event queued.")
    assert page.locator("[data-secret]").count() == 0  # never shown again
    delivery = Delivery.objects.get(endpoint=endpoint)
    row = page.locator(f'tbody[data-delivery="{delivery.pk}"]')
    # The log re-renders itself until the worker's attempt is recorded.
    expect(row.locator("[data-attempt-status]")).to_have_text(["HTTP 200"], timeout=30_000)
    expect(row).to_have_attribute("data-status", "succeeded")
    expect(row.locator("[data-attempt-count]")).to_have_text("1")
    expect(row).to_contain_text("webhook.test")
    expect(row.locator("[data-attempt]")).to_contain_text("ok")  # the receiver's answer

    first = receiver.wait_for(1)[0]
    assert first.headers["Service-Event"] == "webhook.test"
    assert first.headers["Service-Delivery"] == delivery.pk
    header = first.headers["Service-Signature"]
    assert _readme_verify(first.body, header, secret)
    stripe.WebhookSignature.verify_header(first.body.decode(), header, secret, 300)
    payload = json.loads(first.body)
    assert payload["type"] == "webhook.test" and payload["id"] == delivery.pk
    assert payload["data"]["endpoint"] == {"id": endpoint_id, "url": receiver.url}
    screenshot(page, "webhook-deliveries")
    page.set_viewport_size(PHONE)
    assert horizontal_overflow(page) <= 0
    page.set_viewport_size({"width": 1280, "height": 800})

    # Replay: the same delivery again, a second attempt in its log.
    row.get_by_role("button", name=f"Replay {delivery.pk}").click()
    expect(page.get_by_role("status")).to_have_text(
        f"Delivery {delivery.pk} queued again. New attempts appear below."
    )
    expect(row.locator("[data-attempt-status]")).to_have_text(
        ["HTTP 200", "HTTP 200"], timeout=30_000
    )
    second = receiver.wait_for(2)[1]
    assert second.headers["Service-Delivery"] == delivery.pk and second.body == first.body
    assert _readme_verify(second.body, second.headers["Service-Signature"], secret)

    page.goto("/")
    page.goto(f"/webhooks/{endpoint_id}/")
    assert page.locator("[data-secret]").count() == 0

    page.goto("/webhooks/")
    listed = page.locator(f'tr[data-endpoint="{endpoint_id}"]')
    expect(listed).to_contain_text(receiver.url)
    expect(listed).to_contain_text("inbox.created")
    expect(listed).to_contain_text("enabled")
    expect(listed).to_contain_text("succeeded")
    expect(listed).to_contain_text("HTTP 200")
    screenshot(page, "webhooks")
    page.set_viewport_size(PHONE)
    assert horizontal_overflow(page) <= 0


def test_failed_attempts_are_logged_with_the_answer(
    page: Any,
    team: Team,
    receiver: Receiver,  # noqa: F811
) -> None:
    receiver.default = (500, 0.0)
    login(page, "admin@acme.test")
    endpoint_id = _create(page, receiver.url)
    page.get_by_role("button", name="Send test event").click()
    row = page.locator("tbody[data-delivery]")
    expect(row.locator("[data-attempt-status]").first).to_have_text("HTTP 500", timeout=30_000)
    expect(row).to_have_attribute("data-status", "retrying")
    expect(row).to_contain_text("HTTP 500")
    assert Delivery.objects.get(endpoint_id=endpoint_id).status == "retrying"


def test_form_errors_are_plain_and_nothing_is_saved(page: Any, team: Team) -> None:
    login(page, "owner@acme.test")
    page.goto("/webhooks/new/")
    page.get_by_label("URL").fill("ftp://files.example.com/in")
    page.get_by_label("email.received", exact=False).uncheck()
    page.get_by_role("button", name="Create endpoint").click()
    errors = page.locator(".errorlist")
    expect(errors.first).to_be_visible()
    text = " ".join(errors.all_inner_texts())
    assert "Choose at least one event." in text
    page.get_by_label("email.received", exact=False).check()
    page.get_by_label("URL").fill("ftp://files.example.com/in")
    page.get_by_role("button", name="Create endpoint").click()
    expect(page.locator(".errorlist")).to_contain_text("Only http and https URLs are allowed.")
    page.get_by_label("URL").fill("not a url")
    page.get_by_role("button", name="Create endpoint").click()
    expect(page.locator(".errorlist")).to_contain_text("Enter a valid URL.")
    assert not Endpoint.objects.exists()


def test_edit_disable_and_delete(page: Any, team: Team, receiver: Receiver) -> None:  # noqa: F811
    login(page, "owner@acme.test")
    endpoint_id = _create(page, receiver.url)
    page.get_by_role("link", name="Edit").click()
    page.get_by_label("URL").fill(receiver.url + "?v=2")
    page.get_by_label("email.labeled", exact=False).check()
    page.get_by_role("button", name="Save endpoint").click()
    expect(page.get_by_role("status")).to_have_text("Endpoint saved.")
    endpoint = Endpoint.objects.get(pk=endpoint_id)
    assert endpoint.url == receiver.url + "?v=2"
    assert endpoint.events == ["email.received", "email.labeled"]

    page.get_by_role("button", name="Disable").click()
    expect(page.get_by_role("status")).to_have_text("Endpoint disabled: it gets no events.")
    endpoint.refresh_from_db()
    assert not endpoint.enabled
    page.goto("/webhooks/")
    expect(page.locator(f'tr[data-endpoint="{endpoint_id}"]')).to_contain_text("disabled")
    page.get_by_role("button", name=f"Enable {endpoint.url}").click()
    expect(page.get_by_role("status")).to_have_text("Endpoint enabled: it gets events again.")
    endpoint.refresh_from_db()
    assert endpoint.enabled

    page.goto(f"/webhooks/{endpoint_id}/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete").click()
    expect(page.get_by_role("status")).to_have_text(
        f"Endpoint {endpoint.url} deleted with its delivery log."
    )
    assert not Endpoint.objects.exists()


def test_members_read_but_cannot_manage_webhooks(page: Any, team: Team) -> None:
    endpoint, _ = webhook_services.endpoint_create(
        workspace=team.workspace,
        url="https://hooks.example.com/in",
        events=["email.received"],
        inbox_ids=[],
        label_keys=[],
        by=Actor.system("tests"),
    )
    delivery = webhook_services.send_test(endpoint=endpoint)
    login(page, "member@acme.test")
    page.goto("/webhooks/")
    assert page.get_by_role("link", name="New endpoint").count() == 0
    assert page.get_by_role("button", name="Disable https://hooks.example.com/in").count() == 0
    page.get_by_role("link", name="Delivery log of https://hooks.example.com/in").click()
    expect(page.locator(f'tbody[data-delivery="{delivery.pk}"]')).to_contain_text("webhook.test")
    for name in ("Send test event", "Delete", "Disable", f"Replay {delivery.pk}"):
        assert page.get_by_role("button", name=name).count() == 0, name
    assert page.get_by_role("link", name="Edit").count() == 0

    page.goto("/webhooks/new/")
    expect(page.locator("[data-forbidden]")).to_contain_text(
        "Only admins and owners of Acme can do this."
    )
    allow_console_error(page, "403")
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    for path in (
        "/webhooks/new/",
        f"/webhooks/{endpoint.pk}/test/",
        f"/webhooks/{endpoint.pk}/delete/",
        f"/webhooks/{endpoint.pk}/deliveries/{delivery.pk}/replay/",
    ):
        response = page.request.post(
            path,
            form={"csrfmiddlewaretoken": csrf, "url": "https://evil.example.com/"},
            headers={"X-CSRFToken": csrf},
        )
        assert response.status == 403, path
    assert list(Endpoint.objects.values_list("url", flat=True)) == ["https://hooks.example.com/in"]
    assert Delivery.objects.count() == 1
