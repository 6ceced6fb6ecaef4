"""config.layers.PubSubLayer against the real Redis: what ``group_send_many`` publishes from a
thread is what the layer's own ``group_send`` publishes, heard by a subscriber of the group, in
order, and under the layer's prefix only."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from django.conf import settings

from config.layers import PubSubLayer

pytestmark = pytest.mark.topology_production  # embedded mode has no Redis: the in-memory layer


def _layer(prefix: str) -> PubSubLayer:
    return PubSubLayer(hosts=[settings.REDIS_URL], prefix=prefix)


async def _heard(
    listener: PubSubLayer, group: str, publish: Any, count: int, within: float = 5.0
) -> list[dict[str, Any]]:
    channel = await listener.new_channel()
    await listener.group_add(group, channel)
    try:
        await asyncio.to_thread(publish)  # from a thread, as the receive path's writer does
        return [await asyncio.wait_for(listener.receive(channel), within) for _ in range(count)]
    finally:
        await listener.group_discard(group, channel)
        await listener.flush()


def test_a_batch_sent_from_a_thread_is_heard_in_order() -> None:
    prefix, group = f"test-{uuid.uuid4().hex[:8]}", "inbox.inb_layer"
    sender, listener = _layer(prefix), _layer(prefix)
    messages = [(group, {"type": "event.wake", "id": n, "data": {"n": [n, "é"]}}) for n in range(5)]
    heard = asyncio.run(_heard(listener, group, lambda: sender.group_send_many(messages), 5))
    assert heard == [message for _, message in messages]


def test_it_publishes_what_group_send_publishes() -> None:
    prefix, group = f"test-{uuid.uuid4().hex[:8]}", "inbox.inb_same"
    message = {"type": "event.wake", "id": 7, "prev_id": None, "at": 1, "data": {"k": "v"}}

    def both() -> None:
        _layer(prefix).group_send_many([(group, message)])
        asyncio.run(_layer(prefix).group_send(group, message))

    heard = asyncio.run(_heard(_layer(prefix), group, both, 2))
    assert heard == [message, message]


def test_another_prefix_does_not_hear_it() -> None:
    group = "inbox.inb_prefix"
    listener, sender = _layer(f"test-{uuid.uuid4().hex[:8]}"), _layer("elsewhere")
    with pytest.raises(TimeoutError):
        asyncio.run(
            _heard(listener, group, lambda: sender.group_send_many([(group, {"n": 1})]), 1, 1.0)
        )
