"""Redis commands in one round trip on a connection the calling thread holds.

What ``client.pipeline(transaction=False)`` does, without its per-call work — a pipeline object,
a checkout from the client's shared pool (its lock and a liveness poll of the socket), the reply
callbacks — for the paths every request takes: the key cache's counter and epoch read
(``apikeys.keycache``; ``Pipeline.execute`` was 7 % of a ``GET /emails/{id}``'s CPU under 50
clients) and the wake-up ``PUBLISH`` after a commit (``config.layers``).

Each thread keeps one connection per client's pool, made with the pool's own settings (address,
timeouts, credentials, TLS, redis-py's retries of the connect), outside the pool. A connection
that fails (Redis restarted, the connection killed) is dropped and the commands sent once more
on a new one; a counter whose reply was lost after the server ran it may then count twice, as
with redis-py's own retries. Every reply is read before an error reply raises
``redis.ResponseError`` (a ``MISCONF`` or ``READONLY`` refusal of a write, say), so the
connection stays in step: the next call reads its own replies. Any other failure mid-read drops
the connection. Replies are as the server gives them (integers, bytes, None): no response
callbacks.
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
            replies = []
            for _ in commands:  # every reply read, errors too: the next call's come next
                try:
                    replies.append(connection.read_response())
                except redis.ResponseError as error:
                    replies.append(error)
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            _drop(pool, connection)
            if attempt == 2:
                raise
            continue
        except BaseException:  # anything else mid-read: its replies may be unread, never reuse it
            _drop(pool, connection)
            raise
        for reply in replies:
            if isinstance(reply, redis.ResponseError):
                raise reply
        return replies
    raise AssertionError("unreachable")


def _drop(pool: Any, connection: Any) -> None:
    connection.disconnect()
    _held.connections.pop(pool, None)
