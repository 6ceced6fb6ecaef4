"""The records the API answers, as thin typed views over the JSON.

Each record keeps the whole JSON object (``record.data``, also ``record["key"]``) and declares
the fields it gives attributes to with :class:`Field`, naming their JSON types. The declarations
are data the contract test reads: a field the server's schema lacks, or has with another type,
fails it. Fields the client does not declare are still in ``data``; nothing is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar, overload

T = TypeVar("T")
R = TypeVar("R", bound="Record")


class Field(Generic[T]):
    """An attribute read from the record's JSON under ``key`` (the attribute name unless given);
    ``types`` are the JSON Schema types the server may answer for it."""

    def __init__(self, *types: str, key: str | None = None) -> None:
        self.types = frozenset(types)
        self.key = key or ""
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.key = self.key or name

    @overload
    def __get__(self, obj: None, owner: Any = None) -> Field[T]: ...

    @overload
    def __get__(self, obj: Record, owner: Any = None) -> T: ...

    def __get__(self, obj: Record | None, owner: Any = None) -> Any:
        if obj is None:
            return self
        return obj.data.get(self.key)


class Record:
    """A JSON object answered by the API; ``schema`` names its OpenAPI component."""

    schema: ClassVar[str] = ""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.data == self.data  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        ident = self.data.get("id") or self.data.get("key") or ""
        return f"<{type(self).__name__} {ident}>"

    @classmethod
    def fields(cls) -> dict[str, Field[Any]]:
        """The declared fields, by attribute name (the contract test's view of the model)."""
        found: dict[str, Field[Any]] = {}
        for klass in reversed(cls.__mro__):
            for name, value in vars(klass).items():
                if isinstance(value, Field):
                    found[name] = value
        return found


class InboxRecord(Record):
    """An inbox (``InboxOut``); the client's :class:`~pigeonhole_client.Inbox` adds the helpers."""

    schema = "InboxOut"
    id: Field[str] = Field("string")
    address: Field[str] = Field("string")
    local_part: Field[str] = Field("string")
    domain: Field[str] = Field("string")
    name: Field[str] = Field("string")
    agent_name: Field[str] = Field("string")
    tags: Field[list[str]] = Field("array")
    status: Field[str] = Field("string")
    permanent: Field[bool] = Field("boolean")
    ttl_minutes: Field[int | None] = Field("integer", "null")
    expires_at: Field[str | None] = Field("string", "null")
    max_emails: Field[int | None] = Field("integer", "null")
    email_count: Field[int] = Field("integer")
    unread_count: Field[int] = Field("integer")
    last_email_at: Field[str | None] = Field("string", "null")
    created_at: Field[str] = Field("string")


class EmailSummary(Record):
    """An email as lists show it (``EmailSummaryOut``)."""

    schema = "EmailSummaryOut"
    id: Field[str] = Field("string")
    inbox_id: Field[str] = Field("string")
    from_: Field[dict[str, str] | None] = Field("object", "null", key="from")
    to: Field[list[dict[str, str]]] = Field("array")
    subject: Field[str] = Field("string")
    preview: Field[str] = Field("string")
    labels: Field[list[dict[str, Any]]] = Field("array")
    read: Field[bool] = Field("boolean")
    starred: Field[bool] = Field("boolean")
    received_at: Field[str] = Field("string")
    has_attachments: Field[bool] = Field("boolean")

    @property
    def sender(self) -> str:
        """The sender's address ("" when the message had none)."""
        return (self.from_ or {}).get("address", "")


class Email(Record):
    """The full email record (``EmailOut``), with its extracted code and links."""

    schema = "EmailOut"
    id: Field[str] = Field("string")
    inbox_id: Field[str] = Field("string")
    from_: Field[dict[str, str] | None] = Field("object", "null", key="from")
    to: Field[list[dict[str, str]]] = Field("array")
    cc: Field[list[dict[str, str]]] = Field("array")
    subject: Field[str] = Field("string")
    preview: Field[str] = Field("string")
    text: Field[str] = Field("string")
    html: Field[str] = Field("string")
    labels: Field[list[dict[str, Any]]] = Field("array")
    read: Field[bool] = Field("boolean")
    starred: Field[bool] = Field("boolean")
    received_at: Field[str] = Field("string")
    message_id: Field[str] = Field("string")
    headers: Field[list[dict[str, str]]] = Field("array")
    attachments: Field[list[dict[str, Any]]] = Field("array")
    extracted: Field[dict[str, Any]] = Field("object")
    size: Field[int] = Field("integer")
    envelope_recipients: Field[list[str]] = Field("array")
    # SPF, DKIM (one per signature), DMARC and ARC verdicts; None when not checked.
    authentication: Field[dict[str, Any] | None] = Field("object", "null")

    @property
    def sender(self) -> str:
        return (self.from_ or {}).get("address", "")

    @property
    def code(self) -> str | None:
        """The verification code the server extracted, if any."""
        return (self.extracted or {}).get("code")

    @property
    def links(self) -> list[dict[str, str]]:
        """The links the server extracted: ``{"url", "text", "kind"}``."""
        return list((self.extracted or {}).get("links") or [])

    def link(self, kind: str | None = None) -> str | None:
        """The primary link, or the first link of ``kind`` (verify, login, reset, …)."""
        if kind is None:
            return (self.extracted or {}).get("link")
        for link in self.links:
            if link.get("kind") == kind:
                return link.get("url")
        return None


class OutboxItem(Record):
    """An outgoing email (``OutboxOut``)."""

    schema = "OutboxOut"
    id: Field[str] = Field("string")
    inbox_id: Field[str] = Field("string")
    to: Field[list[str]] = Field("array")
    subject: Field[str] = Field("string")
    text: Field[str] = Field("string")
    status: Field[str] = Field("string")
    error: Field[str] = Field("string")
    approval_required: Field[bool] = Field("boolean")
    message_id: Field[str] = Field("string")
    created_at: Field[str] = Field("string")
    sent_at: Field[str | None] = Field("string", "null")


class Label(Record):
    """A label (``LabelOut``)."""

    schema = "LabelOut"
    id: Field[str] = Field("string")
    key: Field[str] = Field("string")
    name: Field[str] = Field("string")
    color: Field[str] = Field("string")
    instructions: Field[str] = Field("string")
    threshold: Field[float] = Field("number")
    enabled: Field[bool] = Field("boolean")


class Webhook(Record):
    """A webhook endpoint (``EndpointOut``); ``secret`` only in the create response."""

    schema = "EndpointOut"
    id: Field[str] = Field("string")
    url: Field[str] = Field("string")
    events: Field[list[str]] = Field("array")
    inbox_ids: Field[list[str]] = Field("array")
    label_keys: Field[list[str]] = Field("array")
    enabled: Field[bool] = Field("boolean")
    created_at: Field[str] = Field("string")

    @property
    def secret(self) -> str | None:
        return self.data.get("secret")


class Delivery(Record):
    """A webhook delivery (``DeliveryOut``)."""

    schema = "DeliveryOut"
    id: Field[str] = Field("string")
    endpoint_id: Field[str] = Field("string")
    event: Field[str] = Field("string")
    status: Field[str] = Field("string")
    attempts: Field[list[dict[str, Any]]] = Field("array")
    payload: Field[dict[str, Any]] = Field("object")


class ApiKey(Record):
    """An API key (``KeyOut``); ``key`` (the plain key) only in the create response."""

    schema = "KeyOut"
    id: Field[str] = Field("string")
    name: Field[str] = Field("string")
    kind: Field[str] = Field("string")
    scopes: Field[list[str]] = Field("array")
    prefix: Field[str] = Field("string")
    require_approval: Field[bool] = Field("boolean")
    expires_at: Field[str | None] = Field("string", "null")
    created_at: Field[str] = Field("string")

    @property
    def key(self) -> str | None:
        return self.data.get("key")


MODELS: tuple[type[Record], ...] = (
    InboxRecord,
    EmailSummary,
    Email,
    OutboxItem,
    Label,
    Webhook,
    Delivery,
    ApiKey,
)


@dataclass(frozen=True)
class Event:
    """One Server-Sent Event of an inbox stream: its ``id`` (what a reconnect resumes after),
    ``event`` name (``email.received``, …) and JSON ``data``."""

    id: str | None
    event: str
    data: dict[str, Any]
