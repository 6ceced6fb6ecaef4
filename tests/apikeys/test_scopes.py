"""Every operation x every single scope: 403 insufficient_scope exactly where the tables say."""

from __future__ import annotations

import pytest

from apikeys.models import Workspace, effective_scopes
from tests.conftest import Api, error_of

pytestmark = pytest.mark.django_db

# (method, path, required scope). Grows with every issue; {key} is a key of the workspace.
OPERATIONS = [
    ("GET", "keys", "admin"),
    ("POST", "keys", "admin"),
    ("PATCH", "keys/{key}", "admin"),
    ("DELETE", "keys/{key}", "admin"),
    ("GET", "me", "read"),
    ("GET", "domains", "read"),
]
BODIES = {("POST", "keys"): {"name": "x"}, ("PATCH", "keys/{key}"): {"require_approval": True}}


def test_implication_rules() -> None:
    assert effective_scopes(["admin"]) == {"admin", "write", "read", "send"}
    assert effective_scopes(["write"]) == {"write", "read"}
    assert effective_scopes(["send"]) == {"send"}
    assert effective_scopes(["read"]) == {"read"}
    assert effective_scopes(["send", "read"]) == {"send", "read"}


@pytest.mark.parametrize("granted", ["read", "write", "send", "admin"])
@pytest.mark.parametrize(("method", "path", "required"), OPERATIONS)
def test_scope_matrix(
    workspace: Workspace,
    make_key,
    granted: str,
    method: str,
    path: str,
    required: str,  # type: ignore[no-untyped-def]
) -> None:
    target = Api(make_key(workspace, ("read",)))
    target_id = target.call("GET", "me").json()["key"]["id"]
    client = Api(make_key(workspace, (granted,)))
    response = client.call(method, path.format(key=target_id), BODIES.get((method, path)))
    if required in effective_scopes([granted]):
        assert response.status_code == 200, response.content
    else:
        assert error_of(response) == (403, "insufficient_scope")
        assert required in response.json()["error"]["message"]
