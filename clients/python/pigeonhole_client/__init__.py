"""pigeonhole-client: a typed Python client of the Pigeonhole inbox API, with a pytest plugin
(``pigeonhole_client.pytest_plugin``) and a CLI (``pigeonhole``).

    from pigeonhole_client import Pigeonhole

    with Pigeonhole() as ph, ph.inboxes.create() as inbox:  # PIGEONHOLE_URL, PIGEONHOLE_API_KEY
        sign_up(inbox.address)
        code = inbox.wait_for_code(timeout=60)
"""

from __future__ import annotations

from .aio import AsyncInbox, AsyncPigeonhole
from .client import Inbox, NothingExtracted, Pigeonhole
from .errors import (
    AddressTaken,
    APIConnectionError,
    BadRequest,
    ConfigurationError,
    Conflict,
    FeatureDisabled,
    Forbidden,
    InsufficientScope,
    InvalidDomain,
    InvalidJSON,
    LabelExists,
    LimitReached,
    NoDomain,
    NotFound,
    PigeonholeError,
    RateLimited,
    Unauthorized,
    UnknownLabel,
    ValidationError,
    WaitTimeout,
)
from .models import ApiKey, Delivery, Email, EmailSummary, Event, Label, OutboxItem, Webhook
from .webhooks import InvalidSignature, verify_webhook

__version__ = "0.1.0"

__all__ = [
    "APIConnectionError",
    "AddressTaken",
    "ApiKey",
    "AsyncInbox",
    "AsyncPigeonhole",
    "BadRequest",
    "ConfigurationError",
    "Conflict",
    "Delivery",
    "Email",
    "EmailSummary",
    "Event",
    "FeatureDisabled",
    "Forbidden",
    "Inbox",
    "InsufficientScope",
    "InvalidDomain",
    "InvalidJSON",
    "InvalidSignature",
    "Label",
    "LabelExists",
    "LimitReached",
    "NoDomain",
    "NotFound",
    "NothingExtracted",
    "OutboxItem",
    "Pigeonhole",
    "PigeonholeError",
    "RateLimited",
    "Unauthorized",
    "UnknownLabel",
    "ValidationError",
    "WaitTimeout",
    "Webhook",
    "verify_webhook",
]
