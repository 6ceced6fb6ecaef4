"""The channel layer of a deployment with Redis: channels_redis's pub/sub layer, plus publishing a
batch of group messages from a worker thread in one round trip.

The receive path commits a batch of mail in a worker thread and then wakes the waiters and
streams of every inbox it touched (``events.wake.publish``). Through the layer's own
``group_send`` that meant a hop to the process's event loop (``async_to_sync``), one ``PUBLISH``
round trip per event there, and the thread waiting for all of it: a wait that grew with the
events of each batch, while the smtpd's next batch waited behind it (measured in the commit that
introduced this module). :meth:`PubSubLayer.group_send_many` sends the same messages (the layer's
own serializer, its group channel names and shards) as one round trip of ``PUBLISH`` commands from
the calling thread (:mod:`config.roundtrip`), with a synchronous client kept per process.

Subscribers are unchanged: web processes subscribe through the layer as before, and a message
published here is what ``group_send`` would have published.

This module is the one place that uses channels_redis's internals (house style): its shard
function (``utils._consistent_hash``) and the name its pub/sub layer gives a group's channel
(``RedisPubSubLoopLayer._get_group_channel_name``). The versions it was written against are
pinned in ``pyproject.toml``; ``tests/test_channels_redis_internals.py`` checks both and fails
naming the library, its version and what moved.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import redis
from channels_redis.pubsub import RedisPubSubChannelLayer
from channels_redis.utils import _consistent_hash, decode_hosts

from config.roundtrip import round_trip

SOCKET_TIMEOUT = 5.0  # seconds; a Redis that does not answer must not hold a batch for long


class PubSubLayer(RedisPubSubChannelLayer):
    """``channels_redis.pubsub.RedisPubSubChannelLayer`` with :meth:`group_send_many`."""

    def __init__(self, *args: Any, hosts: Any = None, prefix: str = "asgi", **kwargs: Any) -> None:
        super().__init__(*args, hosts=hosts, prefix=prefix, **kwargs)
        self.group_prefix = f"{prefix}__group__"  # RedisPubSubLoopLayer._get_group_channel_name
        self._hosts = decode_hosts(hosts)
        self._clients: list[redis.Redis | None] = [None] * len(self._hosts)
        self._clients_lock = threading.Lock()

    def _client(self, shard: int) -> redis.Redis:
        client = self._clients[shard]
        if client is None:
            with self._clients_lock:
                client = self._clients[shard]
                if client is None:
                    host = dict(self._hosts[shard])
                    options = {"socket_timeout": SOCKET_TIMEOUT}
                    if "address" in host:
                        client = redis.Redis.from_url(host.pop("address"), **options, **host)
                    else:
                        client = redis.Redis(**{**options, **host})
                    self._clients[shard] = client
        return client

    def group_send_many(self, messages: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Publishes ``(group, message)`` pairs in order, one round trip per shard, from a thread
        (never from a running event loop: it blocks for the round trip)."""
        by_shard: dict[int, list[tuple[str, bytes]]] = {}
        for group, message in messages:
            channel = f"{self.group_prefix}{group}"
            shard = _consistent_hash(channel, len(self._hosts))
            by_shard.setdefault(shard, []).append((channel, self.serialize(message)))
        for shard, published in by_shard.items():
            round_trip(
                self._client(shard),
                *(("PUBLISH", channel, payload) for channel, payload in published),
            )
