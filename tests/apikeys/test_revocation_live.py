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
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from django.db import connection

from apikeys import services
from apikeys.audit import Actor
from apikeys.models import ApiKey, Workspace
from apikeys.services import ALL_SCOPES
from inboxes import services as inbox_services
from tests.live import Process, child_env, embedded, free_port

pytestmark = pytest.mark.django_db(transaction=True)


def _webs(env: dict[str, str]) -> Iterator[list[str]]:
    processes = []
    for _ in range(2):
        port = free_port()
        argv = [sys.executable, "-m", "config.web", "-b", "127.0.0.1", "-p", str(port)]
        processes.append(Process([*argv, "config.asgi:application"], port, env).start())
    yield [f"http://127.0.0.1:{p.port}/api/v1" for p in processes]
    for process in processes:
        process.stop()
        print("\n".join(process.logs))  # shown when the test failed


@pytest.fixture
def webs(transactional_db: None) -> Iterator[list[str]]:
    yield from _webs(child_env(connection.settings_dict["NAME"]))


# The key watch's periodic check, in the processes of the test below: far longer than the test
# gives the revocation, so only the wake-up of the revoking commit can end the requests in time.
SLOW_CHECK = 300.0
IN_TIME = 30.0  # seconds: ample for a wake-up and a query on a loaded machine, not for SLOW_CHECK


@pytest.fixture
def slow_watch_webs(transactional_db: None) -> Iterator[list[str]]:
    env = {**child_env(connection.settings_dict["NAME"]), "KEY_WATCH_SECONDS": str(SLOW_CHECK)}
    yield from _webs(env)


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


def test_a_revocation_wakes_the_key_watch_of_every_process(
    slow_watch_webs: list[str], workspace: Workspace
) -> None:
    """A wait and a stream opened with a key in each of two web processes end as soon as the key
    is revoked through a third process (the services, as the dashboard or the admin would), not
    at the watch's next periodic check: the revoking commit wakes every process's key watch over
    the channel layer (``apikeys.epoch.GROUP``). In the embedded configuration there is no
    shared channel layer: the key is revoked through the first process's API, and that
    process's requests are the ones expected to end."""
    key_id, plain = _key(workspace, "victim")
    _, admin = _key(workspace, "admin")
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="watched")
    webs = slow_watch_webs[:1] if embedded() else slow_watch_webs
    headers = {"Authorization": f"Bearer {plain}"}
    opened = threading.Semaphore(0)
    ended: dict[str, tuple[float, str]] = {}

    def stream(base: str) -> None:
        with httpx.stream(
            "GET", f"{base}/inboxes/{inbox.pk}/stream", headers=headers, timeout=SLOW_CHECK
        ) as response:
            assert response.status_code == 200
            lines = []
            for line in response.iter_lines():
                if line == ": connected":
                    opened.release()
                lines.append(line)
        ended[f"stream {base}"] = (time.time(), " | ".join(lines))

    sent: list[float] = []

    def wait(base: str) -> None:
        def on_sent(_: httpx.Request) -> None:
            sent.append(time.time())
            opened.release()

        with httpx.Client(headers=headers, event_hooks={"request": [on_sent]}) as http:
            response = http.get(
                f"{base}/inboxes/{inbox.pk}/wait", params={"timeout": 120}, timeout=SLOW_CHECK
            )
        ended[f"wait {base}"] = (time.time(), f"{response.status_code} {response.text}")

    threads = [
        threading.Thread(target=fn, args=(base,), daemon=True)
        for base in webs
        for fn in (stream, wait)
    ]
    for thread in threads:
        thread.start()
    for _ in threads:
        assert opened.acquire(timeout=60), "a stream did not open"
    time.sleep(1.0)  # the waits, sent, are parked and watched by now
    assert ended == {}, ended  # none answered before the revocation ...
    if embedded():
        revoked = httpx.delete(
            f"{webs[0]}/keys/{key_id}", headers={"Authorization": f"Bearer {admin}"}, timeout=60
        )
        assert revoked.status_code == 200, revoked.text
    else:
        services.api_key_revoke(key=ApiKey.objects.get(pk=key_id), by=Actor.system("tests"))
    committed = ApiKey.objects.get(pk=key_id).revoked_at.timestamp()
    # ... and each was sent well before it, so it was let in then: its 401 is the watch's doing,
    # not a refusal at the door
    assert len(sent) == len(webs) and max(sent) < committed - 0.5, (sent, committed)
    for thread in threads:
        thread.join(IN_TIME)
    assert len(ended) == 2 * len(webs), f"still open {IN_TIME:g} s after the revocation: {ended}"
    for what, (at, answer) in ended.items():
        assert at - committed < IN_TIME, (what, at - committed)
        if what.startswith("wait"):
            assert answer.startswith("401") and "revoked" in answer, (what, answer)
        else:
            assert "revoked" in answer, (what, answer)  # the comment line naming the reason
    print(
        f"\n{len(ended)} requests ended {max(at for at, _ in ended.values()) - committed:.3f} s "
        f"after the revocation at the latest (periodic check every {SLOW_CHECK:g} s)"
    )
