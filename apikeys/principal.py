"""Who is calling: the credential behind a request, resolved once by authentication.

Every API view reads ``request.auth`` (a :class:`Principal`) for the workspace and scopes; nothing
else decides tenancy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from apikeys.models import ApiKey, Workspace


@dataclass(frozen=True)
class Principal:
    workspace: Workspace
    scopes: frozenset[str]
    key: ApiKey | None = None
    user: Any = None
    role: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return "api_key" if self.key is not None else "session"

    @property
    def rate_limit_id(self) -> str:
        return f"key:{self.key.pk}" if self.key is not None else f"user:{self.user.pk}"

    @property
    def requires_approval(self) -> bool:
        return self.workspace.require_approval or bool(self.key and self.key.require_approval)

    def has(self, scope: str) -> bool:
        return scope in self.scopes
