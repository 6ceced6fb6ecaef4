"""Wake-ups: after an event commits, its listeners are told on the channel layer. Each event goes
to its inbox's group (so the chain stays whole for the inbox's waiters and streams), an email's
events (``WORKSPACE_EVENTS``) also to its workspace's group (the workspace-wide wait,
``GET /emails/wait``, which cannot know the inbox a catch-all message will land in), and to the
extra groups its emitter named (``Change.wake``); this module names no group of another app.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Sequence
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from events.models import Event

logger = logging.getLogger(__name__)

_publishing: set[asyncio.Task[None]] = set()  # wake-ups being published from a running loop
# The event loop whose hub listens in this process (events.hub): a thread hands the in-memory
# layer's sends to it, as that layer's queues belong to it.
_serving: asyncio.AbstractEventLoop | None = None


def served_by(loop: asyncio.AbstractEventLoop) -> None:
    """Called by the hub of ``loop``: wake-ups sent from other threads go to that loop."""
    global _serving
    _serving = loop


def inbox_group(inbox_id: str) -> str:
    """The channel-layer group of an inbox's listeners."""
    return f"inbox.{inbox_id}"


# The events a workspace-wide listener is woken for: those that can make an email match a wait.
WORKSPACE_EVENTS = frozenset({"email.received", "email.labeled", "email.updated"})


def workspace_group(workspace_id: str) -> str:
    """The channel-layer group of a workspace's listeners (the email events of all its inboxes)."""
    return f"workspace.{workspace_id}"


def groups_of(event: Event) -> list[str]:
    """The groups an event wakes, its inbox's first."""
    groups = [inbox_group(event.inbox_id)] if event.inbox_id else []
    if event.type in WORKSPACE_EVENTS and event.workspace_id:
        groups.append(workspace_group(event.workspace_id))
    return [*groups, *getattr(event, "wake", ())]


def wake_message(event: Event) -> dict[str, Any]:
    """What listeners receive: the event itself, so the common case needs no query."""
    return {
        "type": "event.wake",
        "id": event.pk,
        "prev_id": event.prev_id,
        "event": event.type,
        "inbox_id": event.inbox_id,
        "at": int(event.created_at.timestamp() * 1000),
        "data": event.data,
    }


def publish(records: Sequence[Event]) -> None:
    """Publishes each event to its groups on the channel layer, in order (see :func:`send`)."""
    send(
        [
            (group, {**wake_message(event), "group": group})
            for event in records
            for group in groups_of(event)
        ]
    )


def send(messages: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """Publishes ``(group, message)`` pairs on the channel layer, in order: from a thread, with
    Redis, as one round trip of ``PUBLISH`` commands sent from that thread
    (``config.layers.PubSubLayer.group_send_many``); else the whole batch in one hop to the event
    loop of this process's hub (:func:`served_by`; the in-memory layer's queues are that loop's
    and not safe to touch from another thread), or, with no hub here, to a loop of its own. A
    message names its group (``"group"``): the hub hands it to that group's listeners."""
    layer = get_channel_layer()
    if layer is None or not messages:
        return

    async def send_all() -> None:
        for group, message in messages:
            await layer.group_send(group, message)

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        send_many = getattr(layer, "group_send_many", None)
        serving = _serving
        if send_many is not None:
            send_many(messages)
        elif serving is not None and serving.is_running():
            asyncio.run_coroutine_threadsafe(send_all(), serving).add_done_callback(_sent)
        else:
            async_to_sync(send_all)()
    else:  # called from code running inside an event loop: publish from that loop
        task = loop.create_task(send_all())
        _publishing.add(task)
        task.add_done_callback(_publishing.discard)


def _sent(future: concurrent.futures.Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.error("wake-up not sent", exc_info=future.exception())
