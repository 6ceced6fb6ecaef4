"""Wake-ups sent from a plain thread (a REST request's thread of ``config.api.handler``, a job's)
reach the hub of the process's event loop at once, on either channel layer: Redis pub/sub, or
the in-memory layer of embedded mode, whose queues belong to the hub's loop (a send from another
thread used to land without waking that loop: the message waited for whatever woke it next).
The in-memory layer keeps a group's members as long as the hub holds them (its default expiry
dropped them after a day). And a transaction that changes many keys wakes the key watches once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection, transaction

from apikeys import epoch
from apikeys.audit import Actor
from apikeys.models import ApiKey, Workspace
from apikeys.services import api_key_create
from events import wake
from events.hub import hub


def test_a_wake_up_sent_from_a_plain_thread_is_heard_at_once() -> None:
    async def main() -> float:
        listener = await hub().listen("tests.from-thread")
        try:
            sent: list[float] = []

            def send() -> None:
                sent.append(time.monotonic())
                wake.send([("tests.from-thread", {"type": "t", "group": "tests.from-thread"})])

            threading.Thread(target=send).start()  # nothing else wakes the loop meanwhile
            message = await asyncio.wait_for(listener.get(), timeout=20)
            assert message["group"] == "tests.from-thread"
            return time.monotonic() - sent[0]
        finally:
            hub().leave(listener)

    took = asyncio.run(main())
    print(f"\nwake-up from a plain thread heard after {took * 1000:.1f} ms")
    # At once (0.5 ms in-memory, about 100 ms through Redis here). Before, only when something
    # else woke the loop: the hub's first sweep, 4 to 6 s after it started (4.3 s measured).
    assert took < 2.5, took


def test_the_in_memory_layer_keeps_a_group_membership_older_than_a_day() -> None:
    config = settings.CHANNEL_LAYERS["default"]
    if config["BACKEND"] == "config.layers.PubSubLayer":  # Redis pub/sub: no membership expires
        return
    assert config["BACKEND"] == "channels.layers.InMemoryChannelLayer"
    assert get_channel_layer().group_expiry >= 10 * 365 * 86400


def _wakes() -> int:
    """The credentials wake-ups the open transaction will send when it commits."""
    return sum(getattr(fn, "_credentials", False) for _, fn, _ in connection.run_on_commit)


@pytest.mark.django_db(transaction=True)
def test_a_transaction_that_changes_many_keys_wakes_the_watches_once(workspace: Workspace) -> None:
    with transaction.atomic():
        for n in range(5):
            api_key_create(workspace=workspace, name=f"k{n}", by=Actor.system("tests"))
        ApiKey.objects.filter(workspace=workspace).update(name="renamed")
        assert _wakes() == 1


@pytest.mark.django_db(transaction=True)
def test_a_wake_registered_in_a_rolled_back_savepoint_is_registered_again() -> None:
    with transaction.atomic():
        try:
            with transaction.atomic():
                epoch.bump()
                assert _wakes() == 1
                raise RuntimeError("rolled back")
        except RuntimeError:
            pass
        assert _wakes() == 0  # went with the savepoint
        epoch.bump()
        epoch.bump()
        assert _wakes() == 1


@pytest.mark.django_db(transaction=True)
def test_the_key_watch_listens_again_after_the_channel_layer_failed(
    workspace: Workspace,
    settings,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # type: ignore[no-untyped-def]
    """The watch's first subscription fails (the hub is handed a second channel layer, which
    refuses to subscribe a channel it did not make); once the hub's own layer is back the watch
    subscribes again within ``RELISTEN_SECONDS``, and a revocation then reaches it by its
    wake-up (the periodic check is 300 s here). Before, one failure left the watch on the
    periodic check until the process ended."""
    from apikeys import services as key_services
    from apikeys import watch as key_watch
    from config.layers import PubSubLayer

    settings.KEY_WATCH_SECONDS = 300.0
    monkeypatch.setattr(key_watch, "RELISTEN_SECONDS", 0.5)
    key = api_key_create(workspace=workspace, name="watched", by=Actor.system("tests")).key

    async def until(condition: Callable[[], bool], what: str) -> None:
        for _ in range(200):
            if condition():
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"not within 10 s: {what}")

    async def main() -> float:
        listeners = hub()
        started = await listeners.listen("tests.start")  # the hub runs on its own layer
        listeners.leave(started)
        good, listeners.layer = listeners.layer, PubSubLayer(hosts=["redis://127.0.0.1:1"])
        told = asyncio.Event()
        watcher = key_watch.KeyWatch()
        watcher.watch(workspace.pk, key.pk, lambda _: told.set())
        await until(
            lambda: any("cannot listen" in r.getMessage() for r in caplog.records),
            "the first listen failed",
        )
        listeners.layer = good
        await until(lambda: epoch.GROUP in listeners.listeners, "the watch listens again")
        assert not told.is_set()

        def revoke() -> None:
            try:
                key_services.api_key_revoke(key=key, by=Actor.system("tests"))
            finally:
                connection.close()

        revoked = time.monotonic()
        await asyncio.to_thread(revoke)
        try:
            await asyncio.wait_for(told.wait(), timeout=10)
        except TimeoutError:
            raise AssertionError("the watch did not hear the revocation") from None
        return time.monotonic() - revoked

    took = asyncio.run(main())
    print(f"\nwatch after a failed listen: told {took * 1000:.0f} ms after the revocation")
