"""The synchronous client, :class:`Pigeonhole`, its resources, and :class:`Inbox` with the
helpers a test wants (wait for a mail, its code or link, stream events, delete on exit).

Every request goes through :meth:`Pigeonhole._send`, which applies the retry policy of
``_core``; every request is built by ``_core.build`` from a declared operation.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any, Callable, TypeVar

import httpx

from . import _core
from ._core import Call, Config, Since, build
from .errors import (
    APIConnectionError,
    NotFound,
    PigeonholeError,
    RateLimited,
    WaitTimeout,
    error_from,
)
from .models import (
    ApiKey,
    Delivery,
    Email,
    EmailSummary,
    Event,
    InboxRecord,
    Label,
    OutboxItem,
    Record,
    Webhook,
)

R = TypeVar("R", bound=Record)
# ``list`` is also a method name of the resources below; annotations there use these names.
Strings = list[str]


class NothingExtracted(PigeonholeError):
    """The awaited email came, but the server found no code (or link of that kind) in it."""


class Pigeonhole:
    """A client of one Pigeonhole instance.

    ``Pigeonhole()`` reads ``PIGEONHOLE_URL`` and ``PIGEONHOLE_API_KEY``; arguments win over
    them. Use it as a context manager (or call :meth:`close`) to release its connections.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
        max_retry_wait: float | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.config = Config.resolve(
            base_url,
            api_key,
            timeout=timeout,
            max_retries=max_retries,
            max_retry_wait=max_retry_wait,
        )
        self._http = http_client or httpx.Client(timeout=self.config.timeout)
        self.inboxes = Inboxes(self)
        self.emails = Emails(self)
        self.outbox = Outbox(self)
        self.labels = Labels(self)
        self.webhooks = Webhooks(self)
        self.keys = Keys(self)
        self._sleep: Callable[[float], None] = time.sleep

    # --- lifecycle

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Pigeonhole:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the workspace

    def stats(self) -> dict[str, Any]:
        """Usage counts and recent events of the workspace."""
        return self._json(build("stats"))

    def me(self) -> dict[str, Any]:
        """The current credential and its entitlements."""
        return self._json(build("me"))

    def domains(self) -> list[dict[str, Any]]:
        """The domains new inboxes can use."""
        return list(self._json(build("domains")).get("data", []))

    # --- transport

    def _request(self, call: Call, timeout: httpx.Timeout | None = None) -> httpx.Request:
        return self._http.build_request(
            call.method,
            self.config.api_root + call.path,
            params=call.params,
            json=call.body,
            headers={**self.config.headers(), **call.headers},
            timeout=timeout if timeout is not None else self.config.timeout,
        )

    def _send(
        self, call: Call, *, timeout: httpx.Timeout | None = None, stream: bool = False
    ) -> httpx.Response:
        """Sends ``call``, retrying 429s (after ``Retry-After``) and, where safe, dropped
        connections; raises the error class of an error response."""
        attempt = 0
        while True:
            try:
                response = self._http.send(self._request(call, timeout), stream=stream)
            except httpx.TransportError as exc:
                if attempt >= self.config.max_retries or not _core.retryable_exception(call, exc):
                    raise APIConnectionError(
                        f"{call.method} {call.path}: {exc!r}", code="connection_error"
                    ) from exc
                delay = self.config.delay(attempt)
                _core.log_retry(call, attempt + 1, delay, type(exc).__name__)
                self._sleep(delay)
                attempt += 1
                continue
            if response.status_code < 400:
                return response
            if stream:
                response.read()
                response.close()
            if response.status_code == 429 and attempt < self.config.max_retries:
                delay = self.config.delay(attempt, response)
                _core.log_retry(call, attempt + 1, delay, "429, Retry-After honoured")
                self._sleep(delay)
                attempt += 1
                continue
            raise error_from(response)

    def _json(self, call: Call, **kwargs: Any) -> dict[str, Any]:
        return self._send(call, **kwargs).json()

    def _pages(
        self,
        name: str,
        path_params: dict[str, str] | None,
        query: dict[str, Any],
        make: Callable[[dict[str, Any]], R],
    ) -> Iterator[R]:
        """Every item of a list, page after page following ``next_cursor``."""
        cursor: str | None = None
        while True:
            page = self._json(build(name, path_params, query={**query, "cursor": cursor}))
            for item in page.get("data", []):
                yield make(item)
            cursor = page.get("next_cursor")
            if not cursor:
                return


class _Resource:
    def __init__(self, client: Pigeonhole) -> None:
        self._client = client


class Inboxes(_Resource):
    """``/inboxes``: create, read, list, change and delete inboxes; wait and stream."""

    def _inbox(self, data: dict[str, Any]) -> Inbox:
        return Inbox(data, self._client)

    def create(
        self,
        *,
        local_part: str | None = None,
        domain: str | None = None,
        name: str | None = None,
        ttl_minutes: int | None = None,
        agent_name: str | None = None,
        tags: list[str] | None = None,
        max_emails: int | None = None,
        overflow: str | None = None,
        allow_senders: list[str] | None = None,
        block_senders: list[str] | None = None,
        forward_to: str | None = None,
    ) -> Inbox:
        """A new inbox (every argument optional: a random address on the default domain)."""
        body = {
            "local_part": local_part,
            "domain": domain,
            "name": name,
            "ttl_minutes": ttl_minutes,
            "agent_name": agent_name,
            "tags": tags,
            "max_emails": max_emails,
            "overflow": overflow,
            "allow_senders": allow_senders,
            "block_senders": block_senders,
            "forward_to": forward_to,
        }
        return self._inbox(self._client._json(build("inboxes.create", body=body)))

    def get(self, inbox_id: str) -> Inbox:
        """The inbox with this id (``inb_…``) or address."""
        return self._inbox(self._client._json(build("inboxes.get", {"inbox_id": inbox_id})))

    def list(
        self,
        *,
        q: str | None = None,
        tag: str | None = None,
        agent: str | None = None,
        include_expired: bool | None = None,
        limit: int | None = None,
    ) -> Iterator[Inbox]:
        """Every inbox matching the filters (``limit`` is the page size, not a total)."""
        query = {
            "q": q,
            "tag": tag,
            "agent": agent,
            "include_expired": include_expired,
            "limit": limit,
        }
        return self._client._pages("inboxes.list", None, query, self._inbox)

    def update(self, inbox_id: str, **fields: Any) -> Inbox:
        """Changes the given fields (``name``, ``ttl_minutes``, ``tags``, ``extend_minutes``, …)."""
        call = build("inboxes.update", {"inbox_id": inbox_id}, body=fields)
        return self._inbox(self._client._json(call))

    def delete(self, inbox_id: str) -> None:
        """Deletes the inbox and all its mail."""
        self._client._send(build("inboxes.delete", {"inbox_id": inbox_id}))

    def wait(
        self,
        inbox_id: str,
        *,
        from_: str | None = None,
        subject: str | None = None,
        timeout: float = 30.0,
        since: Since = None,
    ) -> Email:
        """The first email received at or after ``since`` (default: now) whose sender contains
        ``from_`` and whose subject matches the regular expression ``subject``, held open on
        the server (``GET …/wait``); a ``timeout`` beyond the server's 120 s is several waits
        with the same ``since``. Raises :class:`WaitTimeout` when none came."""
        client = self._client
        since_text = _core.since_value(since) or _core.iso(_utcnow())
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            seconds = max(1, min(client.config.max_server_wait, math.ceil(remaining)))
            call = build(
                "inboxes.wait",
                {"inbox_id": inbox_id},
                query={"timeout": seconds, "from": from_, "subject": subject, "since": since_text},
            )
            response = client._send(call, timeout=_core.wait_timeout(seconds))
            if response.status_code == 200:
                return Email(response.json())
            if deadline - time.monotonic() <= 0.5:
                raise WaitTimeout(
                    f"no email matching from={from_!r} subject={subject!r} within {timeout:g} s",
                    code="wait_timeout",
                )

    def stream(
        self,
        inbox_id: str,
        *,
        last_event_id: str | None = None,
        timeout: int | None = None,
        reconnect_for: float = 60.0,
    ) -> Iterator[Event]:
        """The inbox's events as they happen (``email.received``, ``email.updated``, …).

        A dropped connection (the server restarted, a proxy cut it) is reopened with
        ``Last-Event-ID`` set to the last event seen, so nothing is lost or repeated; the
        stream gives up after ``reconnect_for`` seconds without a successful reconnect.
        ``timeout`` (seconds) ends the stream on the server's side; ``last_event_id`` resumes
        after a given event (``"0"``: replay the inbox's retained events first).
        """
        client = self._client
        last = last_event_id
        failing_since: float | None = None
        attempt = 0
        while True:
            headers = {"Last-Event-ID": last} if last is not None else None
            call = build(
                "inboxes.stream",
                {"inbox_id": inbox_id},
                query={"timeout": timeout},
                headers=headers,
            )
            try:
                response = client._send(call, timeout=_core.stream_timeout(60.0), stream=True)
                try:
                    failing_since, attempt = None, 0
                    parser = _core.SseParser()
                    for line in response.iter_lines():
                        event = parser.feed(line)
                        if event is not None:
                            if event.id is not None:
                                last = event.id
                            yield event
                finally:
                    response.close()
                if timeout is not None:
                    return  # the server ended it at our timeout
            except (httpx.TransportError, APIConnectionError, RateLimited) as exc:
                now = time.monotonic()
                failing_since = failing_since or now
                if now - failing_since > reconnect_for:
                    raise APIConnectionError(
                        f"stream of {inbox_id}: no reconnect within {reconnect_for:g} s",
                        code="connection_error",
                    ) from exc
                response_of = exc.response if isinstance(exc, RateLimited) else None
                delay = client.config.delay(min(attempt, 4), response_of)
                _core.log_retry(call, attempt + 1, delay, f"stream dropped ({type(exc).__name__})")
                client._sleep(delay)
                attempt += 1


class Emails(_Resource):
    """Received mail: list, search, read, download, change and delete."""

    def list(
        self,
        inbox_id: str,
        *,
        q: str | None = None,
        label: str | None = None,
        unread: bool | None = None,
        since: Since = None,
        limit: int | None = None,
    ) -> Iterator[EmailSummary]:
        """The inbox's emails, newest first."""
        query = {
            "q": q,
            "label": label,
            "unread": unread,
            "since": _core.since_value(since),
            "limit": limit,
        }
        return self._client._pages("emails.list", {"inbox_id": inbox_id}, query, EmailSummary)

    def search(
        self,
        *,
        inbox: str | None = None,
        q: str | None = None,
        label: str | None = None,
        unread: bool | None = None,
        since: Since = None,
        limit: int | None = None,
    ) -> Iterator[EmailSummary]:
        """Emails of every inbox (or of ``inbox``, an id or address) matching the filters."""
        query = {
            "inbox": inbox,
            "q": q,
            "label": label,
            "unread": unread,
            "since": _core.since_value(since),
            "limit": limit,
        }
        return self._client._pages("emails.search", None, query, EmailSummary)

    def get(self, email_id: str, *, mark_read: bool | None = None) -> Email:
        call = build("emails.get", {"email_id": email_id}, query={"mark_read": mark_read})
        return Email(self._client._json(call))

    def raw(self, email_id: str) -> bytes:
        """The message as received (MIME, ``.eml``)."""
        return self._client._send(build("emails.raw", {"email_id": email_id})).content

    def attachment(self, email_id: str, attachment_id: str) -> bytes:
        """One attachment's content."""
        ids = {"email_id": email_id, "attachment_id": attachment_id}
        return self._client._send(build("emails.attachment", ids)).content

    def update(
        self,
        email_id: str,
        *,
        read: bool | None = None,
        starred: bool | None = None,
        labels: Strings | None = None,
        remove_labels: Strings | None = None,
    ) -> Email:
        body = {"read": read, "starred": starred, "labels": labels, "remove_labels": remove_labels}
        return Email(self._client._json(build("emails.update", {"email_id": email_id}, body=body)))

    def delete(self, email_id: str) -> None:
        self._client._send(build("emails.delete", {"email_id": email_id}))


class Outbox(_Resource):
    """Outgoing mail: send from an inbox, read and list what was sent."""

    def send(
        self,
        inbox_id: str,
        *,
        to: Strings,
        subject: str,
        text: str,
        cc: Strings | None = None,
        html: str | None = None,
        in_reply_to: str | None = None,
        reason: str | None = None,
        wait: int | None = None,
        idempotency_key: str | None = None,
    ) -> OutboxItem:
        """Sends a message from the inbox. An ``Idempotency-Key`` is added (or the one given is
        used) and kept across retries, so a send retried after a dropped connection mails once.
        The item's ``status`` is ``sent``, or ``pending`` when a person must approve it."""
        body = {
            "to": to,
            "cc": cc,
            "subject": subject,
            "text": text,
            "html": html,
            "in_reply_to": in_reply_to,
            "reason": reason,
        }
        call = build(
            "outbox.send",
            {"inbox_id": inbox_id},
            query={"wait": wait},
            body=body,
            headers={"Idempotency-Key": idempotency_key},
        )
        timeout = _core.wait_timeout(wait) if wait else None
        return OutboxItem(self._client._json(call, timeout=timeout))

    def get(self, item_id: str, *, wait: int | None = None) -> OutboxItem:
        call = build("outbox.get", {"item_id": item_id}, query={"wait": wait})
        timeout = _core.wait_timeout(wait) if wait else None
        return OutboxItem(self._client._json(call, timeout=timeout))

    def list(
        self,
        *,
        status: str | None = None,
        delivery: str | None = None,
        limit: int | None = None,
    ) -> Iterator[OutboxItem]:
        query = {"status": status, "delivery": delivery, "limit": limit}
        return self._client._pages("outbox.list", None, query, OutboxItem)


class Labels(_Resource):
    """Labels and their rules."""

    def list(self, *, limit: int | None = None) -> Iterator[Label]:
        return self._client._pages("labels.list", None, {"limit": limit}, Label)

    def create(self, key: str, name: str, **fields: Any) -> Label:
        body = {"key": key, "name": name, **fields}
        return Label(self._client._json(build("labels.create", body=body)))

    def update(self, key: str, **fields: Any) -> Label:
        return Label(self._client._json(build("labels.update", {"key": key}, body=fields)))

    def delete(self, key: str) -> None:
        self._client._send(build("labels.delete", {"key": key}))

    def test(self, **fields: Any) -> dict[str, Any]:
        """Runs the rules (and classifier) on ``from``/``subject``/``text`` or an ``email_id``;
        pass ``from_`` for ``from``. Nothing is stored."""
        if "from_" in fields:
            fields["from"] = fields.pop("from_")
        return self._client._json(build("labels.test", body=fields))


class Webhooks(_Resource):
    """Webhook endpoints and their deliveries."""

    def list(self, *, limit: int | None = None) -> Iterator[Webhook]:
        return self._client._pages("webhooks.list", None, {"limit": limit}, Webhook)

    def create(self, url: str, **fields: Any) -> Webhook:
        """A new endpoint; its ``secret`` (for :func:`verify_webhook`) is in this answer only."""
        return Webhook(self._client._json(build("webhooks.create", body={"url": url, **fields})))

    def update(self, endpoint_id: str, **fields: Any) -> Webhook:
        call = build("webhooks.update", {"endpoint_id": endpoint_id}, body=fields)
        return Webhook(self._client._json(call))

    def delete(self, endpoint_id: str) -> None:
        self._client._send(build("webhooks.delete", {"endpoint_id": endpoint_id}))

    def deliveries(self, endpoint_id: str, *, limit: int | None = None) -> Iterator[Delivery]:
        ids = {"endpoint_id": endpoint_id}
        return self._client._pages("webhooks.deliveries", ids, {"limit": limit}, Delivery)

    def replay(self, endpoint_id: str, delivery_id: str) -> Delivery:
        ids = {"endpoint_id": endpoint_id, "delivery_id": delivery_id}
        return Delivery(self._client._json(build("webhooks.replay", ids)))

    def test(self, endpoint_id: str) -> Delivery:
        ids = {"endpoint_id": endpoint_id}
        return Delivery(self._client._json(build("webhooks.test", ids)))


class Keys(_Resource):
    """API keys of the workspace (admin scope)."""

    def list(self, *, limit: int | None = None) -> Iterator[ApiKey]:
        return self._client._pages("keys.list", None, {"limit": limit}, ApiKey)

    def create(self, name: str, **fields: Any) -> ApiKey:
        """A new key; the plain key (``.key``) is in this answer only."""
        return ApiKey(self._client._json(build("keys.create", body={"name": name, **fields})))

    def update(self, key_id: str, *, require_approval: bool) -> ApiKey:
        body = {"require_approval": require_approval}
        return ApiKey(self._client._json(build("keys.update", {"key_id": key_id}, body=body)))

    def delete(self, key_id: str) -> None:
        """Revokes the key."""
        self._client._send(build("keys.delete", {"key_id": key_id}))


class Inbox(InboxRecord):
    """An inbox bound to its client: ``wait``, ``wait_for_code``, ``wait_for_link``,
    ``stream``, ``emails``, ``send``; as a context manager it deletes itself on exit.

    Its waits count mail received since the inbox was created unless given ``since``: a test
    that triggers a mail before it starts waiting still gets it.
    """

    def __init__(self, data: dict[str, Any], client: Pigeonhole) -> None:
        super().__init__(data)
        self._client = client

    def __enter__(self) -> Inbox:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(NotFound):
            self.delete()

    def refresh(self) -> Inbox:
        self.data = self._client.inboxes.get(self.id).data
        return self

    def update(self, **fields: Any) -> Inbox:
        self.data = self._client.inboxes.update(self.id, **fields).data
        return self

    def delete(self) -> None:
        self._client.inboxes.delete(self.id)

    def emails(self, **filters: Any) -> Iterator[EmailSummary]:
        return self._client.emails.list(self.id, **filters)

    def send(self, *, to: Strings, subject: str, text: str, **fields: Any) -> OutboxItem:
        return self._client.outbox.send(self.id, to=to, subject=subject, text=text, **fields)

    def wait(
        self,
        *,
        from_: str | None = None,
        subject: str | None = None,
        timeout: float = 30.0,
        since: Since = None,
    ) -> Email:
        """The first matching email (see :meth:`Inboxes.wait`); ``since`` defaults to the
        inbox's creation."""
        return self._client.inboxes.wait(
            self.id,
            from_=from_,
            subject=subject,
            timeout=timeout,
            since=since if since is not None else self.created_at,
        )

    def wait_for_code(self, **filters: Any) -> str:
        """The verification code of the first matching email."""
        email = self.wait(**filters)
        if not email.code:
            raise NothingExtracted(
                f"email {email.id} ({email.subject!r}) has no code", code="no_code"
            )
        return email.code

    def wait_for_link(self, kind: str | None = None, **filters: Any) -> str:
        """The primary link, or the first link of ``kind`` (``verify``, ``login``, ``reset``,
        ``unsubscribe``, ``other``), of the first matching email."""
        email = self.wait(**filters)
        link = email.link(kind)
        if not link:
            raise NothingExtracted(
                f"email {email.id} ({email.subject!r}) has no {kind or 'primary'} link",
                code="no_link",
            )
        return link

    def stream(
        self,
        *,
        last_event_id: str | None = None,
        timeout: int | None = None,
        reconnect_for: float = 60.0,
    ) -> Iterator[Event]:
        """The inbox's events, resumed after a dropped connection (see :meth:`Inboxes.stream`)."""
        return self._client.inboxes.stream(
            self.id, last_event_id=last_event_id, timeout=timeout, reconnect_for=reconnect_for
        )


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)
