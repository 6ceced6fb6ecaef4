"""Shared fixtures: workspaces, keys with given scopes, and API clients that use them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rest_framework.test import APIClient

from apikeys import services as key_services
from apikeys.models import Workspace
from tests.factories import WorkspaceFactory

ALL = ("read", "write", "send", "admin")


class Api(APIClient):
    """An API client bound to one plain key (or none), speaking JSON under /api/v1."""

    def __init__(self, plain: str | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.plain = plain
        if plain:
            self.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")

    def url(self, path: str) -> str:
        return (
            path
            if path.startswith("/") and not path.startswith("/v1")
            else f"/api/v1/{path.lstrip('/')}"
        )

    def call(self, method: str, path: str, data: object = None, **extra: object):  # type: ignore[no-untyped-def]
        fn = getattr(self, method.lower())
        if method.upper() in {"GET", "DELETE", "HEAD"}:
            return fn(self.url(path), data, **extra)
        return fn(self.url(path), data, format="json", **extra)


@pytest.fixture
def workspace(db: None) -> Workspace:
    return WorkspaceFactory()


@pytest.fixture
def other_workspace(db: None) -> Workspace:
    return WorkspaceFactory(name="Bob's workspace")


@pytest.fixture
def make_key(db: None) -> Callable[..., str]:
    def make(workspace: Workspace, scopes: tuple[str, ...] = ALL, **kwargs: object) -> str:
        return key_services.api_key_create(
            workspace=workspace, name="test key", scopes=scopes, **kwargs
        ).plain

    return make


@pytest.fixture
def api(workspace: Workspace, make_key: Callable[..., str]) -> Api:
    """An admin-scoped client of ``workspace``."""
    return Api(make_key(workspace))


@pytest.fixture
def other_api(other_workspace: Workspace, make_key: Callable[..., str]) -> Api:
    """An admin-scoped client of another workspace (Charlie has no access to Alice's stuff)."""
    return Api(make_key(other_workspace))


@pytest.fixture
def anon() -> Api:
    return Api()


def error_of(response) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    """(status, envelope code) of an error response, asserting the envelope's shape."""
    body = response.json()
    assert set(body) == {"error"}, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return response.status_code, body["error"]["code"]
