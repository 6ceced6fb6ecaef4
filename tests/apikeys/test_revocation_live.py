"""Revoking a key takes effect on the next request in every web process, whatever each process
has cached of it (apikeys.keycache: the credentials epoch in Redis is checked on every request).

Two live web processes (daphne, ``config.web``) on the test database; both serve the key until
each has it cached, then the key is revoked — through the API of one of them, or through the
services from a third process (as the dashboard or the admin would) — and the very next request
with it is 401 on both. In the embedded configuration (SQLite, no Redis) nothing is cached and
the same answers are expected.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import httpx
import pytest
from django.db import connection

from apikeys import services
from apikeys.audit import Actor
from apikeys.models import ApiKey, Workspace
from apikeys.services import ALL_SCOPES
from tests.live import Process, child_env, free_port

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def webs(transactional_db: None) -> Iterator[list[str]]:
    env = child_env(connection.settings_dict["NAME"])
    processes = []
    for _ in range(2):
        port = free_port()
        argv = [sys.executable, "-m", "config.web", "-b", "127.0.0.1", "-p", str(port)]
        processes.append(Process([*argv, "config.asgi:application"], port, env).start())
    yield [f"http://127.0.0.1:{p.port}/api/v1" for p in processes]
    for process in processes:
        process.stop()
        print("\n".join(process.logs))  # shown when the test failed


def _key(workspace: Workspace, name: str) -> tuple[str, str]:
    created = services.api_key_create(
        workspace=workspace, name=name, scopes=ALL_SCOPES, by=Actor.system("tests")
    )
    return created.key.pk, created.plain


TIMEOUT = 60  # a loaded machine (the suite runs beside other work) answers slowly, never wrongly


def _status(base: str, plain: str) -> tuple[int, str]:
    response = httpx.get(
        f"{base}/inboxes", headers={"Authorization": f"Bearer {plain}"}, timeout=TIMEOUT
    )
    code = response.json()["error"]["code"] if response.status_code >= 400 else ""
    return response.status_code, code


def _warm(webs: list[str], plain: str) -> None:
    for base in webs:
        for _ in range(3):  # cached after the first; the next ones are served from the cache
            assert _status(base, plain) == (200, "")


def test_a_key_revoked_through_one_process_is_refused_by_both(
    webs: list[str], workspace: Workspace
) -> None:
    key_id, plain = _key(workspace, "victim")
    _, admin = _key(workspace, "admin")
    _warm(webs, plain)
    _warm(webs, admin)
    revoked = httpx.delete(
        f"{webs[0]}/keys/{key_id}", headers={"Authorization": f"Bearer {admin}"}, timeout=TIMEOUT
    )
    assert revoked.status_code == 200, revoked.text
    assert _status(webs[1], plain) == (401, "unauthorized")
    assert _status(webs[0], plain) == (401, "unauthorized")
    assert ApiKey.objects.get(pk=key_id).revoked_at is not None
    # The other key of the workspace is still served by both.
    for base in webs:
        assert _status(base, admin) == (200, "")


def test_a_key_revoked_outside_the_web_processes_is_refused_by_both(
    webs: list[str], workspace: Workspace
) -> None:
    key_id, plain = _key(workspace, "victim")
    _warm(webs, plain)
    services.api_key_revoke(key=ApiKey.objects.get(pk=key_id), by=Actor.system("tests"))
    for base in webs:
        assert _status(base, plain) == (401, "unauthorized")


def test_a_workspace_change_reaches_both_processes(webs: list[str], workspace: Workspace) -> None:
    _, plain = _key(workspace, "agent")
    _warm(webs, plain)
    Workspace.objects.filter(pk=workspace.pk).update(name="Renamed")
    for base in webs:
        me = httpx.get(f"{base}/me", headers={"Authorization": f"Bearer {plain}"}, timeout=TIMEOUT)
        assert me.status_code == 200
        assert me.json()["workspace"]["name"] == "Renamed"
