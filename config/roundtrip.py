"""Redis commands in one round trip on a connection the calling thread holds.

What ``client.pipeline(transaction=False)`` does, without its per-call work — a pipeline object,
a checkout from the client's shared pool (its lock and a liveness poll of the socket), the reply
callbacks — for the paths every request takes: the key cache's counter and epoch read
(``apikeys.keycache``; ``Pipeline.execute`` was 7 % of a ``GET /emails/{id}``'s CPU under 50
clients) and the wake-up ``PUBLISH`` after a commit (``config.layers``).

Each thread keeps one connection per client's pool, made with the pool's own settings (address,
timeouts, credentials, TLS), outside the pool. A connection that fails (Redis restarted, the
connection killed) is dropped and the commands sent once more on a new one, as redis-py retries
once; an error reply raises ``redis.ResponseError``. Replies are as the server gives them
(integers, bytes, None): no response callbacks.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

import redis


class _Held(threading.local):
    def __init__(self) -> None:
        # this thread's connections, by the pool whose settings made them
        self.connections: weakref.WeakKeyDictionary[Any, tuple[int, Any]] = (
            weakref.WeakKeyDictionary()
        )


_held = _Held()


def round_trip(client: redis.Redis, *commands: tuple[Any, ...]) -> list[Any]:
    """Sends ``commands`` to ``client``'s server in one round trip on this thread's connection
    and returns their replies in order."""
    pool = client.connection_pool
    pid = os.getpid()
    for attempt in (1, 2):
        held = _held.connections.get(pool)
        if held is None or held[0] != pid:  # none yet, or inherited across a fork
            held = (pid, pool.connection_class(**pool.connection_kwargs))
            _held.connections[pool] = held
        connection = held[1]
        try:
            connection.send_packed_command(connection.pack_commands(commands))
            return [connection.read_response() for _ in commands]
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            connection.disconnect()
            del _held.connections[pool]
            if attempt == 2:
                raise
    raise AssertionError("unreachable")
