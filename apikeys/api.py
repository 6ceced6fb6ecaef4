"""/keys, /me and /audit."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikeys import selectors, services
from apikeys.audit import actor_of
from apikeys.principal import Principal
from apikeys.serializers import (
    AuditEntryOut,
    AuditListQuery,
    KeyCreatedOut,
    KeyCreateIn,
    KeyListQuery,
    KeyOut,
    KeyUpdateIn,
    MeOut,
    audit_record,
)
from config.api.pagination import page_response
from config.api.query import parse_query
from config.api.schema import DeletedOut, link, page_of

SCOPE_ORDER = ("read", "write", "send", "admin")


class KeysApi(APIView):
    scopes = {"GET": "admin", "POST": "admin"}
    links = {
        "POST": {
            "UpdateKey": link("updateKey", "Change it.", key_id="$response.body#/id"),
            "RevokeKey": link("revokeKey", "Revoke it.", key_id="$response.body#/id"),
        }
    }
    tags = ["API keys"]
    query = {"GET": KeyListQuery}

    @extend_schema(
        operation_id="listKeys",
        summary="List API keys",
        description="The workspace's keys, newest first, without secrets (the plain key is in the"
        " create response only). Revoked keys are left out.",
        responses=page_of(KeyOut),
    )
    def get(self, request: Request) -> Response:
        query = parse_query(KeyListQuery, request)
        return page_response(selectors.api_key_list(request.auth.workspace), query, KeyOut)

    @extend_schema(
        operation_id="createKey",
        summary="Create an API key",
        request=KeyCreateIn,
        responses=KeyCreatedOut,
        description="Creates a key. The plain key is in `key`, in this response only.",
    )
    def post(self, request: Request) -> Response:
        body = KeyCreateIn(data=request.data)
        body.is_valid(raise_exception=True)
        principal: Principal = request.auth
        created = services.api_key_create(
            workspace=principal.workspace,
            created_by=principal.user,
            by=actor_of(request),
            **body.validated_data,
        )
        return Response({**KeyOut(created.key).data, "key": created.plain})


class KeyApi(APIView):
    scopes = {"PATCH": "admin", "DELETE": "admin"}
    tags = ["API keys"]

    @extend_schema(
        operation_id="updateKey",
        summary="Change whether a key's mail needs approval",
        description="Sets `require_approval`: while true, mail sent with this key waits for a "
        "person's decision (the send answers 202 with status `pending`).",
        request=KeyUpdateIn,
        responses=KeyOut,
    )
    def patch(self, request: Request, key_id: str) -> Response:
        key = selectors.api_key_get(request.auth.workspace, key_id)
        body = KeyUpdateIn(data=request.data)
        body.is_valid(raise_exception=True)
        key = services.api_key_update(key=key, by=actor_of(request), **body.validated_data)
        return Response(KeyOut(key).data)

    @extend_schema(
        operation_id="revokeKey",
        summary="Revoke an API key",
        responses={200: DeletedOut},
        description="Revokes the key at once: later requests with it answer 401.",
    )
    def delete(self, request: Request, key_id: str) -> Response:
        key = selectors.api_key_get(request.auth.workspace, key_id)
        services.api_key_revoke(key=key, by=actor_of(request))
        return Response({"deleted": True, "id": key.pk})


class MeApi(APIView):
    scopes = {"GET": "read"}
    tags = ["Organization"]

    @extend_schema(
        operation_id="getMe",
        summary="Describe the current credential",
        description="The credential of this request (an API key with its scopes, or a dashboard "
        "session's user), its workspace and the workspace's entitlements.",
        responses=MeOut,
    )
    def get(self, request: Request) -> Response:
        principal: Principal = request.auth
        workspace = principal.workspace
        body: dict = {
            "type": principal.kind,
            "scopes": [s for s in SCOPE_ORDER if s in principal.scopes],
            "workspace": {
                "id": workspace.pk,
                "name": workspace.name,
                "require_approval": workspace.require_approval,
            },
            "entitlements": {
                "permanent_inboxes": workspace.allow_permanent_inboxes,
                "max_inboxes": workspace.max_inboxes,
                "classifier": workspace.classifier_enabled,
                "send": principal.has("send"),
                "rate_limit_per_minute": settings.RATE_LIMIT_PER_MINUTE,
            },
        }
        if principal.key is not None:
            key = principal.key
            body["key"] = {
                "id": key.pk,
                "name": key.name,
                "kind": key.kind,
                "scopes": key.scopes,
                "require_approval": key.require_approval,
                "expires_at": key.expires_at,
            }
        else:
            body["user"] = {
                "id": principal.user.pk,
                "email": principal.user.email or principal.user.get_username(),
                "role": principal.role,
            }
        return Response(MeOut(body).data)


class AuditApi(APIView):
    scopes = {"GET": "admin"}
    tags = ["Organization"]
    query = {"GET": AuditListQuery}

    @extend_schema(
        operation_id="listAuditEntries",
        summary="List the audit log",
        description="Every change a person or key made in the workspace, newest first: keys "
        "created, changed and revoked; invitations, members added, re-roled and removed; "
        "settings; domains; labels; webhook endpoints; inboxes deleted; outbox decisions; "
        "sign-ins (successful and failed) and password changes of the workspace's members. "
        "Each entry names its actor and target as they were at the time, the changed fields "
        "(never a secret) and the client's address. The log is append-only; entries older "
        "than the workspace's `audit_retention_days` are deleted.",
        responses=page_of(AuditEntryOut),
    )
    def get(self, request: Request) -> Response:
        query = parse_query(AuditListQuery, request)
        rows = selectors.audit_list(
            request.auth.workspace,
            actor=query.get("actor"),
            action=query.get("action"),
            since=query.get("since"),
            until=query.get("until"),
        )
        return page_response(rows, query, AuditEntryOut, audit_record)
