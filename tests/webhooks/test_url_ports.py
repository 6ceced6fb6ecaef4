"""Webhook URLs whose port is no port (issue 23, item 12), over HTTP against the live web process.

``http://host:0/`` was accepted: ``urlsplit`` reads the port as 0 and the target check took it
for "no port" (``port or 80``), so the endpoint was stored and called on port 80. Port 0, and
anything outside 1–65535, is now 400 ``validation_error`` on ``url`` at create and at update.
The addresses are IP literals of public networks: nothing is resolved and nothing is called.
(The in-process SSRF matrix, tests/security/test_ssrf.py, has the same forms at send time.)
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from tests.live import Stack
from webhooks.models import Endpoint

PUBLIC = "93.184.215.14"
GOOD = f"http://{PUBLIC}:8080/hook"


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"]).start()
    yield running
    running.stop()


@pytest.fixture
def client(stack: Stack, transactional_db: None, workspace: Workspace) -> Iterator[httpx.Client]:
    key = key_services.api_key_create(
        workspace=workspace, name="k", scopes=["admin"], by=Actor.system("tests")
    ).plain
    with stack.client(key) as client:
        yield client


BAD_PORTS = [
    f"http://{PUBLIC}:0/hook",
    f"https://{PUBLIC}:0/hook",
    f"http://{PUBLIC}:00/hook",
    "http://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:0/hook",
    f"http://{PUBLIC}:65536/hook",
]


def assert_refused_on_url(response: httpx.Response) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert [issue["path"] for issue in error["issues"]] == ["url"]


@pytest.mark.parametrize("url", BAD_PORTS)
def test_a_port_outside_1_to_65535_is_refused_at_create(client: httpx.Client, url: str) -> None:
    assert_refused_on_url(client.post("webhooks", json={"url": url}))
    assert not Endpoint.objects.exists()


def test_a_port_outside_1_to_65535_is_refused_at_update(client: httpx.Client) -> None:
    created = client.post("webhooks", json={"url": GOOD})
    assert created.status_code == 200, created.text
    endpoint_id = created.json()["id"]
    for url in BAD_PORTS:
        assert_refused_on_url(client.patch(f"webhooks/{endpoint_id}", json={"url": url}))
    assert Endpoint.objects.get(pk=endpoint_id).url == GOOD


def test_ports_1_and_65535_are_ports(client: httpx.Client) -> None:
    for port in (1, 65535):
        response = client.post("webhooks", json={"url": f"http://{PUBLIC}:{port}/hook"})
        assert response.status_code == 200, response.text
