"""``apikeys.throttling.round_trip``: the key cache's Redis round trip on a connection each thread
holds (no pipeline object, no pool checkout). Against the real Redis: the replies are the
server's, a killed connection is replaced on the next call without an error reaching the
request, and each thread has a connection of its own."""

from __future__ import annotations

import threading
import uuid

import pytest
import redis

from apikeys import throttling

pytestmark = pytest.mark.topology_production  # Redis: the embedded run has none


def _name() -> str:
    return f"pgh:test:rt:{uuid.uuid4().hex}"


def test_replies_are_the_servers() -> None:
    name = _name()
    client = throttling._redis()
    assert client is not None
    client.set(f"{name}:value", b"42")
    try:
        first = throttling.round_trip(
            ("INCR", name), ("EXPIRE", name, 65, "NX"), ("GET", f"{name}:value")
        )
        second = throttling.round_trip(
            ("INCR", name), ("EXPIRE", name, 65, "NX"), ("GET", f"{name}:absent")
        )
        assert first == [1, 1, b"42"]
        assert second == [2, 0, None]  # NX: the expiry was set already
        assert 0 < client.ttl(name) <= 65
        with pytest.raises(redis.ResponseError):
            throttling.round_trip(("INCR", f"{name}:value"), ("NOSUCHCOMMAND",))
    finally:
        client.delete(name, f"{name}:value")


def test_a_killed_connection_is_replaced_on_the_next_call() -> None:
    name = _name()
    client = throttling._redis()
    assert client is not None
    throttling.round_trip(("CLIENT", "SETNAME", "pgh-round-trip-test"))
    held = [c for c in client.client_list() if c.get("name") == "pgh-round-trip-test"]
    assert len(held) == 1, held
    assert client.client_kill_filter(_id=held[0]["id"]) == 1
    try:
        assert throttling.round_trip(("INCR", name), ("GET", name)) == [1, b"1"]
        assert throttling.round_trip(("INCR", name)) == [2]  # counted once, not twice
        assert not [c for c in client.client_list() if c.get("name") == "pgh-round-trip-test"]
    finally:
        client.delete(name)


def test_each_thread_holds_its_own_connection() -> None:
    client = throttling._redis()
    assert client is not None
    names: list[str] = []

    def run(tag: str) -> None:
        throttling.round_trip(("CLIENT", "SETNAME", tag))
        names.append(throttling.round_trip(("CLIENT", "GETNAME"))[0].decode())

    tags = [f"pgh-rt-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    threads = [threading.Thread(target=run, args=(tag,)) for tag in tags]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(names) == sorted(tags)  # no thread saw another's connection
