"""The OpenAPI 3.1 document: valid, with the bearer scheme and each operation's scope."""

from __future__ import annotations

import pytest
from openapi_spec_validator import validate
from openapi_spec_validator.validation.exceptions import OpenAPIValidationError

from tests.conftest import Api

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def schema(django_db_blocker) -> dict:  # type: ignore[no-untyped-def]
    with django_db_blocker.unblock():
        response = Api().get("/api/openapi.json")
    assert response.status_code == 200
    return response.json()


def test_is_valid_openapi_31(schema: dict) -> None:
    assert schema["openapi"] == "3.1.0"
    validate(schema)


def test_validator_rejects_a_broken_document(schema: dict) -> None:
    broken = {**schema, "paths": {"/x": {"get": {"responses": {"200": {}}}}}}
    with pytest.raises(OpenAPIValidationError):
        validate(broken)


def test_bearer_scheme_and_scopes(schema: dict) -> None:
    scheme = schema["components"]["securitySchemes"]["bearerAuth"]
    assert scheme == {**scheme, "type": "http", "scheme": "bearer"}
    operations = {
        op["operationId"]: op
        for item in schema["paths"].values()
        for method, op in item.items()
        if method in {"get", "post", "patch", "delete", "put"}
    }
    assert operations["createKey"]["x-required-scope"] == "admin"
    assert operations["getMe"]["x-required-scope"] == "read"
    assert operations["listDomains"]["security"][0] == {"bearerAuth": ["read"]}
    for op_id, op in operations.items():
        assert op.get("x-required-scope") in {"read", "write", "send", "admin"}, op_id
        assert "401" in op["responses"] and "403" in op["responses"], op_id


def test_paths_are_under_v1(schema: dict) -> None:
    assert schema["paths"]
    assert all(path.startswith("/api/v1/") for path in schema["paths"])
