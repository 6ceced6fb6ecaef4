"""``config.roundtrip.round_trip``: the key cache's Redis round trip (and the wake-up
``PUBLISH``) on a connection each thread holds (no pipeline object, no pool checkout). Against
the real Redis: the replies are the server's, a killed connection is replaced on the next call
without an error reaching the request, and each thread has a connection of its own per client."""

from __future__ import annotations

import threading
import uuid

import pytest
import redis

from apikeys import throttling
from config.roundtrip import round_trip

pytestmark = pytest.mark.topology_production  # Redis: the embedded run has none


def _name() -> str:
    return f"pgh:test:rt:{uuid.uuid4().hex}"


def test_replies_are_the_servers() -> None:
    name = _name()
    client = throttling._redis()
    assert client is not None
    client.set(f"{name}:value", b"42")
    try:
        first = round_trip(
            client, ("INCR", name), ("EXPIRE", name, 65, "NX"), ("GET", f"{name}:value")
        )
        second = round_trip(
            client, ("INCR", name), ("EXPIRE", name, 65, "NX"), ("GET", f"{name}:absent")
        )
        assert first == [1, 1, b"42"]
        assert second == [2, 0, None]  # NX: the expiry was set already
        assert 0 < client.ttl(name) <= 65
        with pytest.raises(redis.ResponseError):
            round_trip(client, ("INCR", f"{name}:value"), ("NOSUCHCOMMAND",))
    finally:
        client.delete(name, f"{name}:value")


def test_a_killed_connection_is_replaced_on_the_next_call() -> None:
    name = _name()
    client = throttling._redis()
    assert client is not None
    round_trip(client, ("CLIENT", "SETNAME", "pgh-round-trip-test"))
    held = [c for c in client.client_list() if c.get("name") == "pgh-round-trip-test"]
    assert len(held) == 1, held
    assert client.client_kill_filter(_id=held[0]["id"]) == 1
    try:
        assert round_trip(client, ("INCR", name), ("GET", name)) == [1, b"1"]
        assert round_trip(client, ("INCR", name)) == [2]  # counted once, not twice
        assert not [c for c in client.client_list() if c.get("name") == "pgh-round-trip-test"]
    finally:
        client.delete(name)


def test_each_thread_holds_its_own_connection() -> None:
    client = throttling._redis()
    assert client is not None
    names: list[str] = []

    def run(tag: str) -> None:
        round_trip(client, ("CLIENT", "SETNAME", tag))
        names.append(round_trip(client, ("CLIENT", "GETNAME"))[0].decode())

    tags = [f"pgh-rt-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    threads = [threading.Thread(target=run, args=(tag,)) for tag in tags]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(names) == sorted(tags)  # no thread saw another's connection


def test_each_client_has_its_own_connection_in_a_thread() -> None:
    """Two clients (the key cache's and the channel layer's, say) never share a connection: each
    keeps its own settings (database number, timeouts)."""
    client = throttling._redis()
    assert client is not None
    other = redis.Redis(**{**client.connection_pool.connection_kwargs, "socket_timeout": 5.0})
    round_trip(client, ("CLIENT", "SETNAME", "pgh-rt-first"))
    round_trip(other, ("CLIENT", "SETNAME", "pgh-rt-second"))
    assert round_trip(client, ("CLIENT", "GETNAME")) == [b"pgh-rt-first"]
    assert round_trip(other, ("CLIENT", "GETNAME")) == [b"pgh-rt-second"]


def test_an_error_reply_leaves_the_connection_in_step() -> None:
    """An error reply before other replies (a write refused: MISCONF, READONLY, OOM): the call
    raises, and the next call on the thread's connection reads its own replies, not the ones
    left behind (the key cache would otherwise take an epoch for a count, and a stale epoch for
    the current one)."""
    name = _name()
    client = throttling._redis()
    assert client is not None
    client.set(name, b"7")
    try:
        for _ in range(3):
            with pytest.raises(redis.ResponseError):
                round_trip(client, ("NOSUCHCOMMAND",), ("GET", name), ("GET", name))
        assert round_trip(client, ("INCR", name), ("EXISTS", f"{name}:absent")) == [8, 0]
    finally:
        client.delete(name)
