"""drf-spectacular extensions documenting our two authentication classes."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class BearerKeyScheme(OpenApiAuthenticationExtension):
    target_class = "apikeys.authentication.BearerKeyAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "pgh_ API key",
            "description": (
                "An API key created with POST /keys or `manage.py createkey`: `pgh_` followed by "
                "40 base62 characters (the last 6 are a checksum)."
            ),
        }


class SessionScheme(OpenApiAuthenticationExtension):
    target_class = "apikeys.authentication.WorkspaceSessionAuthentication"
    name = "sessionAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "cookie",
            "name": "sessionid",
            "description": "A dashboard session (same-origin; unsafe methods need the CSRF token).",
        }
