"""The internals of channels_redis that ``config.layers`` relies on (its shard function and the
channel name of a group): each check fails naming the library, its version and what moved, so
that an upgrade is read against that module before it ships. No Redis needed: nothing here
connects."""

from __future__ import annotations

import asyncio
import inspect
from importlib.metadata import version

from channels_redis import pubsub, utils

from config.layers import PubSubLayer

CHANNELS_REDIS = f"channels_redis {version('channels-redis')}"
HOSTS = ["redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/1", "redis://127.0.0.1:6379/2"]


def test_channels_redis_is_the_version_config_layers_was_written_against() -> None:
    """A new version needs the checks below read again, and the pin in pyproject.toml moved."""
    assert version("channels-redis").startswith("4.3."), (
        f"{CHANNELS_REDIS}: config/layers.py was written against channels_redis 4.3"
    )


def test_the_shard_function_is_the_one_the_pubsub_layer_uses() -> None:
    shard = getattr(utils, "_consistent_hash", None)
    assert callable(shard), f"{CHANNELS_REDIS}: channels_redis.utils._consistent_hash is gone"
    parameters = list(inspect.signature(shard).parameters)
    assert parameters == ["value", "ring_size"], (
        f"{CHANNELS_REDIS}: _consistent_hash takes {parameters}, not (value, ring_size)"
    )
    assert pubsub._consistent_hash is shard, (
        f"{CHANNELS_REDIS}: the pub/sub layer no longer shards with utils._consistent_hash"
    )
    source = inspect.getsource(pubsub.RedisPubSubLoopLayer._get_shard)
    assert "_consistent_hash(channel_or_group_name, len(self._shards))" in source, (
        f"{CHANNELS_REDIS}: RedisPubSubLoopLayer._get_shard hashes differently now"
    )
    send = inspect.getsource(pubsub.RedisPubSubLoopLayer.group_send)
    for step in (
        "self._get_group_channel_name(group)",
        "self._get_shard(group_channel)",
        "shard.publish(group_channel, self.channel_layer.serialize(message))",
    ):
        assert step in send, f"{CHANNELS_REDIS}: RedisPubSubLoopLayer.group_send lost {step!r}"


def test_a_group_goes_to_the_channel_and_shard_group_send_uses() -> None:
    """What ``config.layers.PubSubLayer.group_send_many`` computes for a group, compared with
    what the library's loop layer computes, over several hosts (so shards differ)."""

    async def run() -> None:
        ours = PubSubLayer(hosts=HOSTS, prefix="pgh")
        theirs = ours._get_layer()  # the loop layer group_send goes through
        assert len(theirs._shards) == len(HOSTS) == len(ours._hosts), (
            f"{CHANNELS_REDIS}: one shard per host no longer holds"
        )
        for group in ("inbox.inb_1", "inbox.inb_2", "outbox.out_3", "é"):
            channel = f"{ours.group_prefix}{group}"
            assert theirs._get_group_channel_name(group) == channel, (
                f"{CHANNELS_REDIS}: a group's channel is now "
                f"{theirs._get_group_channel_name(group)!r}, not {channel!r}"
            )
            index = theirs._shards.index(theirs._get_shard(channel))
            assert utils._consistent_hash(channel, len(HOSTS)) == index, (
                f"{CHANNELS_REDIS}: group {group!r} is on another shard than _consistent_hash says"
            )
        assert utils.decode_hosts(HOSTS) == [{"address": host} for host in HOSTS], (
            f"{CHANNELS_REDIS}: decode_hosts gives {utils.decode_hosts(HOSTS)!r}"
        )

    asyncio.run(run())
