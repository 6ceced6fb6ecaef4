"""/inboxes/{id}/send, /outbox, /outbox/{id}, /outbox/{id}/decision; and /stats (``outbox.stats``).

``wait`` on send and on GET /outbox/{id} is served by ``outbox.realtime`` in front of these
views: the view answers at once, and the wrapper waits for the decision without a thread.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikeys.audit import actor_of
from apikeys.models import role_may
from apikeys.principal import Principal
from config.api.errors import Forbidden, ValidationFailed
from config.api.pagination import page_response
from config.api.query import parse_query
from config.api.schema import link, page_of
from inboxes import selectors as inbox_selectors
from outbox import selectors, services, stats
from outbox.exceptions import InvalidState
from outbox.models import OutboxItem, Status
from outbox.realtime import mark_pending
from outbox.serializers import (
    DecisionIn,
    OutboxListQuery,
    OutboxOut,
    SendIn,
    StatsOut,
    WaitQuery,
)

IDEMPOTENCY = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    required=False,
    description="Retrying with the same key within 24 h returns the original item instead of "
    "sending again; the same key with a different body is a validation_error.",
)
INBOX_ID = OpenApiParameter(
    "inbox_id",
    str,
    OpenApiParameter.PATH,
    description="The inbox id (inb_…) or its full address (case-insensitive; a plus tag, "
    "`alpha+x@…`, names the inbox its mail lands in: `alpha@…`).",
)


def _render(request: Request, item: OutboxItem, status: int = 200) -> Response:
    if item.status == Status.PENDING:  # what ``?wait=`` waits for (outbox.realtime)
        mark_pending(request, item.pk)
    return Response(OutboxOut(services.outbound_record(item)).data, status=status)


class SendApi(APIView):
    scopes = {"POST": "send"}
    errors = {"POST": [InvalidState]}  # the inbox has expired
    links = {
        "POST": {
            "GetOutboxItem": link(
                "getOutboxItem", "The item and its status.", item_id="$response.body#/id"
            ),
            "DecideOutboxItem": link(
                "decideOutboxItem",
                "Approve or reject it (a dashboard session).",
                item_id="$response.body#/id",
            ),
        }
    }
    tags = ["Outbox"]
    query = {"POST": WaitQuery}

    @extend_schema(
        operation_id="sendEmail",
        summary="Send an email from an inbox",
        parameters=[INBOX_ID, IDEMPOTENCY],
        request=SendIn,
        responses={
            200: OpenApiResponse(
                OutboxOut,
                description="Sent (handed to delivery; `delivery.state` says whether it was "
                "delivered, is retrying, failed or was captured).",
            ),
            202: OpenApiResponse(OutboxOut, description="Pending human approval."),
        },
        description="Sends from the inbox. With approval required (workspace setting, or a key "
        "with require_approval) the item is pending and the answer is 202; `wait` holds the "
        "answer until the decision (or the timeout). Recipients on domains this instance "
        "hosts are delivered through its own pipeline.",
    )
    def post(self, request: Request, inbox_id: str) -> Response:
        parse_query(WaitQuery, request)
        principal: Principal = request.auth
        inbox = inbox_selectors.inbox_get(principal.workspace, inbox_id)
        body = SendIn(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        key = request.headers.get("Idempotency-Key", "").strip()
        if len(key) > 255:
            raise ValidationFailed.at("Idempotency-Key", "At most 255 characters.")
        item, _ = services.send_request(
            principal=principal,
            inbox=inbox,
            data=data,
            idempotency_key=key,
            body_hash=services.request_hash(request.data, inbox.pk) if key else "",
        )
        return _render(request, item, 202 if item.status == Status.PENDING else 200)


class OutboxApi(APIView):
    scopes = {"GET": "read"}
    tags = ["Outbox"]
    query = {"GET": OutboxListQuery}

    @extend_schema(
        operation_id="listOutbox",
        summary="List outgoing emails",
        description="Outgoing emails (sent, forwarded and waiting for approval), newest first; "
        "filter by `status` or by `delivery` state.",
        responses=page_of(OutboxOut),
    )
    def get(self, request: Request) -> Response:
        query = parse_query(OutboxListQuery, request)
        rows = selectors.outbox_list(
            request.auth.workspace, status=query.get("status"), delivery=query.get("delivery")
        )
        return page_response(
            rows.select_related("decided_by"), query, OutboxOut, record=services.outbound_record
        )


class OutboxItemApi(APIView):
    scopes = {"GET": "read"}
    tags = ["Outbox"]
    query = {"GET": WaitQuery}

    @extend_schema(
        operation_id="getOutboxItem",
        summary="Get an outgoing email (optionally wait for its decision)",
        responses=OutboxOut,
        description="`wait` (at most 120 s) holds the answer while the item is pending, until "
        "any change of its status.",
    )
    def get(self, request: Request, item_id: str) -> Response:
        parse_query(WaitQuery, request)
        return _render(request, selectors.outbox_get(request.auth.workspace, item_id))


class DecisionApi(APIView):
    scopes = {"POST": "admin"}
    errors = {"POST": [InvalidState]}
    tags = ["Outbox"]

    def check_permissions(self, request: Request) -> None:
        # Credential type and role come before scopes: a key or a member is refused as such.
        principal = request.auth
        if isinstance(principal, Principal):
            if principal.kind != "session":
                raise Forbidden("Decisions are made by a person in the dashboard, not a key.")
            if not role_may(principal.role, "admin"):
                raise Forbidden("Only an owner or an admin may decide.")
        super().check_permissions(request)

    @extend_schema(
        operation_id="decideOutboxItem",
        summary="Approve or reject an outgoing email",
        request=DecisionIn,
        responses=OutboxOut,
        description="Approve (optionally editing subject and text first; an edited text "
        "replaces the HTML part with the text rendered as HTML) or reject a pending "
        "item. Only an owner or admin in a dashboard session (same origin, CSRF token): API "
        "keys get 403 forbidden whatever their scopes. 409 invalid_state when not pending.",
    )
    def post(self, request: Request, item_id: str) -> Response:
        principal: Principal = request.auth
        item = selectors.outbox_get(principal.workspace, item_id)
        body = DecisionIn(data=request.data)
        body.is_valid(raise_exception=True)
        item = services.decide(
            item=item,
            user=principal.user,
            role=principal.role,
            by=actor_of(request),
            **body.validated_data,
        )
        return _render(request, item)


class StatsApi(APIView):
    scopes = {"GET": "read"}
    tags = ["Organization"]

    @extend_schema(
        operation_id="getStats",
        summary="Workspace statistics",
        responses=StatsOut,
        description="Inbox counts by status; emails (total, last 24 h, unread); outbox by "
        "status, and sent items by delivery state (outbox_delivery); webhook deliveries "
        "(last 24 h, failed); storage (bytes of mail stored, the largest inboxes); the 20 most "
        "recent events.",
    )
    def get(self, request: Request) -> Response:
        return Response(StatsOut(stats.workspace_stats(request.auth.workspace)).data)
