"""The asynchronous client, :class:`AsyncPigeonhole`: the same resources and helpers as
:class:`~pigeonhole_client.Pigeonhole`, as coroutines and async iterators (``httpx.AsyncClient``).

Requests are built by the same ``_core.build`` from the same declared operations and retried by
the same policy; only the I/O differs.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from typing import Any, Callable, TypeVar

import httpx

from . import _core
from ._core import Call, Config, Since, build
from .client import NothingExtracted
from .errors import APIConnectionError, NotFound, RateLimited, WaitTimeout, error_from
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
Strings = list[str]


class AsyncPigeonhole:
    """The async client; ``async with AsyncPigeonhole() as ph: …``."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
        max_retry_wait: float | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.config = Config.resolve(
            base_url,
            api_key,
            timeout=timeout,
            max_retries=max_retries,
            max_retry_wait=max_retry_wait,
        )
        self._http = http_client or httpx.AsyncClient(timeout=self.config.timeout)
        self.inboxes = AsyncInboxes(self)
        self.emails = AsyncEmails(self)
        self.outbox = AsyncOutbox(self)
        self.labels = AsyncLabels(self)
        self.webhooks = AsyncWebhooks(self)
        self.keys = AsyncKeys(self)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncPigeonhole:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def stats(self) -> dict[str, Any]:
        return await self._json(build("stats"))

    async def me(self) -> dict[str, Any]:
        return await self._json(build("me"))

    async def domains(self) -> list[dict[str, Any]]:
        return list((await self._json(build("domains"))).get("data", []))

    def _request(self, call: Call, timeout: httpx.Timeout | None = None) -> httpx.Request:
        return self._http.build_request(
            call.method,
            self.config.api_root + call.path,
            params=call.params,
            json=call.body,
            headers={**self.config.headers(), **call.headers},
            timeout=timeout if timeout is not None else self.config.timeout,
        )

    async def _send(
        self, call: Call, *, timeout: httpx.Timeout | None = None, stream: bool = False
    ) -> httpx.Response:
        attempt = 0
        while True:
            try:
                response = await self._http.send(self._request(call, timeout), stream=stream)
            except httpx.TransportError as exc:
                if attempt >= self.config.max_retries or not _core.retryable_exception(call, exc):
                    raise APIConnectionError(
                        f"{call.method} {call.path}: {exc!r}", code="connection_error"
                    ) from exc
                delay = self.config.delay(attempt)
                _core.log_retry(call, attempt + 1, delay, type(exc).__name__)
                await asyncio.sleep(delay)
                attempt += 1
                continue
            if response.status_code < 400:
                return response
            if stream:
                await response.aread()
                await response.aclose()
            if response.status_code == 429 and attempt < self.config.max_retries:
                delay = self.config.delay(attempt, response)
                _core.log_retry(call, attempt + 1, delay, "429, Retry-After honoured")
                await asyncio.sleep(delay)
                attempt += 1
                continue
            raise error_from(response)

    async def _json(self, call: Call, **kwargs: Any) -> dict[str, Any]:
        return (await self._send(call, **kwargs)).json()

    async def _pages(
        self,
        name: str,
        path_params: dict[str, str] | None,
        query: dict[str, Any],
        make: Callable[[dict[str, Any]], R],
    ) -> AsyncIterator[R]:
        cursor: str | None = None
        while True:
            page = await self._json(build(name, path_params, query={**query, "cursor": cursor}))
            for item in page.get("data", []):
                yield make(item)
            cursor = page.get("next_cursor")
            if not cursor:
                return


class _Resource:
    def __init__(self, client: AsyncPigeonhole) -> None:
        self._client = client


class AsyncInboxes(_Resource):
    def _inbox(self, data: dict[str, Any]) -> AsyncInbox:
        return AsyncInbox(data, self._client)

    async def create(self, **fields: Any) -> AsyncInbox:
        """A new inbox; the fields of :meth:`Pigeonhole.inboxes.create`."""
        return self._inbox(await self._client._json(build("inboxes.create", body=fields)))

    async def get(self, inbox_id: str) -> AsyncInbox:
        return self._inbox(await self._client._json(build("inboxes.get", {"inbox_id": inbox_id})))

    def list(self, **query: Any) -> AsyncIterator[AsyncInbox]:
        return self._client._pages("inboxes.list", None, query, self._inbox)

    async def update(self, inbox_id: str, **fields: Any) -> AsyncInbox:
        call = build("inboxes.update", {"inbox_id": inbox_id}, body=fields)
        return self._inbox(await self._client._json(call))

    async def delete(self, inbox_id: str) -> None:
        await self._client._send(build("inboxes.delete", {"inbox_id": inbox_id}))

    async def wait(
        self,
        inbox_id: str,
        *,
        from_: str | None = None,
        subject: str | None = None,
        timeout: float = 30.0,
        since: Since = None,
    ) -> Email:
        client = self._client
        since_text = _core.since_value(since) or _core.iso(datetime.now(timezone.utc))
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            seconds = max(1, min(client.config.max_server_wait, math.ceil(remaining)))
            call = build(
                "inboxes.wait",
                {"inbox_id": inbox_id},
                query={"timeout": seconds, "from": from_, "subject": subject, "since": since_text},
            )
            response = await client._send(call, timeout=_core.wait_timeout(seconds))
            if response.status_code == 200:
                return Email(response.json())
            if deadline - time.monotonic() <= 0.5:
                raise WaitTimeout(
                    f"no email matching from={from_!r} subject={subject!r} within {timeout:g} s",
                    code="wait_timeout",
                )

    async def stream(
        self,
        inbox_id: str,
        *,
        last_event_id: str | None = None,
        timeout: int | None = None,
        reconnect_for: float = 60.0,
    ) -> AsyncIterator[Event]:
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
                response = await client._send(call, timeout=_core.stream_timeout(60.0), stream=True)
                try:
                    failing_since, attempt = None, 0
                    parser = _core.SseParser()
                    async for line in response.aiter_lines():
                        event = parser.feed(line)
                        if event is not None:
                            if event.id is not None:
                                last = event.id
                            yield event
                finally:
                    await response.aclose()
                if timeout is not None:
                    return
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
                await asyncio.sleep(delay)
                attempt += 1


class AsyncEmails(_Resource):
    def list(self, inbox_id: str, **query: Any) -> AsyncIterator[EmailSummary]:
        if "since" in query:
            query["since"] = _core.since_value(query["since"])
        return self._client._pages("emails.list", {"inbox_id": inbox_id}, query, EmailSummary)

    def search(self, **query: Any) -> AsyncIterator[EmailSummary]:
        if "since" in query:
            query["since"] = _core.since_value(query["since"])
        return self._client._pages("emails.search", None, query, EmailSummary)

    async def get(self, email_id: str, *, mark_read: bool | None = None) -> Email:
        call = build("emails.get", {"email_id": email_id}, query={"mark_read": mark_read})
        return Email(await self._client._json(call))

    async def raw(self, email_id: str) -> bytes:
        return (await self._client._send(build("emails.raw", {"email_id": email_id}))).content

    async def attachment(self, email_id: str, attachment_id: str) -> bytes:
        ids = {"email_id": email_id, "attachment_id": attachment_id}
        return (await self._client._send(build("emails.attachment", ids))).content

    async def update(self, email_id: str, **fields: Any) -> Email:
        call = build("emails.update", {"email_id": email_id}, body=fields)
        return Email(await self._client._json(call))

    async def delete(self, email_id: str) -> None:
        await self._client._send(build("emails.delete", {"email_id": email_id}))


class AsyncOutbox(_Resource):
    async def send(
        self,
        inbox_id: str,
        *,
        to: Strings,
        subject: str,
        text: str,
        wait: int | None = None,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> OutboxItem:
        body = {"to": to, "subject": subject, "text": text, **fields}
        call = build(
            "outbox.send",
            {"inbox_id": inbox_id},
            query={"wait": wait},
            body=body,
            headers={"Idempotency-Key": idempotency_key},
        )
        timeout = _core.wait_timeout(wait) if wait else None
        return OutboxItem(await self._client._json(call, timeout=timeout))

    async def get(self, item_id: str, *, wait: int | None = None) -> OutboxItem:
        call = build("outbox.get", {"item_id": item_id}, query={"wait": wait})
        timeout = _core.wait_timeout(wait) if wait else None
        return OutboxItem(await self._client._json(call, timeout=timeout))

    def list(self, **query: Any) -> AsyncIterator[OutboxItem]:
        return self._client._pages("outbox.list", None, query, OutboxItem)


class AsyncLabels(_Resource):
    def list(self, **query: Any) -> AsyncIterator[Label]:
        return self._client._pages("labels.list", None, query, Label)

    async def create(self, key: str, name: str, **fields: Any) -> Label:
        body = {"key": key, "name": name, **fields}
        return Label(await self._client._json(build("labels.create", body=body)))

    async def update(self, key: str, **fields: Any) -> Label:
        return Label(await self._client._json(build("labels.update", {"key": key}, body=fields)))

    async def delete(self, key: str) -> None:
        await self._client._send(build("labels.delete", {"key": key}))

    async def test(self, **fields: Any) -> dict[str, Any]:
        if "from_" in fields:
            fields["from"] = fields.pop("from_")
        return await self._client._json(build("labels.test", body=fields))


class AsyncWebhooks(_Resource):
    def list(self, **query: Any) -> AsyncIterator[Webhook]:
        return self._client._pages("webhooks.list", None, query, Webhook)

    async def create(self, url: str, **fields: Any) -> Webhook:
        call = build("webhooks.create", body={"url": url, **fields})
        return Webhook(await self._client._json(call))

    async def update(self, endpoint_id: str, **fields: Any) -> Webhook:
        call = build("webhooks.update", {"endpoint_id": endpoint_id}, body=fields)
        return Webhook(await self._client._json(call))

    async def delete(self, endpoint_id: str) -> None:
        await self._client._send(build("webhooks.delete", {"endpoint_id": endpoint_id}))

    def deliveries(self, endpoint_id: str, **query: Any) -> AsyncIterator[Delivery]:
        ids = {"endpoint_id": endpoint_id}
        return self._client._pages("webhooks.deliveries", ids, query, Delivery)

    async def replay(self, endpoint_id: str, delivery_id: str) -> Delivery:
        ids = {"endpoint_id": endpoint_id, "delivery_id": delivery_id}
        return Delivery(await self._client._json(build("webhooks.replay", ids)))

    async def test(self, endpoint_id: str) -> Delivery:
        call = build("webhooks.test", {"endpoint_id": endpoint_id})
        return Delivery(await self._client._json(call))


class AsyncKeys(_Resource):
    def list(self, **query: Any) -> AsyncIterator[ApiKey]:
        return self._client._pages("keys.list", None, query, ApiKey)

    async def create(self, name: str, **fields: Any) -> ApiKey:
        return ApiKey(await self._client._json(build("keys.create", body={"name": name, **fields})))

    async def update(self, key_id: str, *, require_approval: bool) -> ApiKey:
        body = {"require_approval": require_approval}
        call = build("keys.update", {"key_id": key_id}, body=body)
        return ApiKey(await self._client._json(call))

    async def delete(self, key_id: str) -> None:
        await self._client._send(build("keys.delete", {"key_id": key_id}))


class AsyncInbox(InboxRecord):
    """An inbox bound to the async client; ``async with`` deletes it on exit."""

    def __init__(self, data: dict[str, Any], client: AsyncPigeonhole) -> None:
        super().__init__(data)
        self._client = client

    async def __aenter__(self) -> AsyncInbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(NotFound):
            await self.delete()

    async def refresh(self) -> AsyncInbox:
        self.data = (await self._client.inboxes.get(self.id)).data
        return self

    async def update(self, **fields: Any) -> AsyncInbox:
        self.data = (await self._client.inboxes.update(self.id, **fields)).data
        return self

    async def delete(self) -> None:
        await self._client.inboxes.delete(self.id)

    def emails(self, **filters: Any) -> AsyncIterator[EmailSummary]:
        return self._client.emails.list(self.id, **filters)

    async def send(self, *, to: Strings, subject: str, text: str, **fields: Any) -> OutboxItem:
        return await self._client.outbox.send(self.id, to=to, subject=subject, text=text, **fields)

    async def wait(
        self,
        *,
        from_: str | None = None,
        subject: str | None = None,
        timeout: float = 30.0,
        since: Since = None,
    ) -> Email:
        return await self._client.inboxes.wait(
            self.id,
            from_=from_,
            subject=subject,
            timeout=timeout,
            since=since if since is not None else self.created_at,
        )

    async def wait_for_code(self, **filters: Any) -> str:
        email = await self.wait(**filters)
        if not email.code:
            raise NothingExtracted(
                f"email {email.id} ({email.subject!r}) has no code", code="no_code"
            )
        return email.code

    async def wait_for_link(self, kind: str | None = None, **filters: Any) -> str:
        email = await self.wait(**filters)
        link = email.link(kind)
        if not link:
            raise NothingExtracted(
                f"email {email.id} ({email.subject!r}) has no {kind or 'primary'} link",
                code="no_link",
            )
        return link

    def stream(self, **options: Any) -> AsyncIterator[Event]:
        return self._client.inboxes.stream(self.id, **options)
