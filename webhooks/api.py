"""/webhooks: endpoints, their delivery log, replay and test."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikeys.audit import actor_of
from config.api.pagination import page_response
from config.api.query import parse_query
from config.api.schema import DeletedOut, link, page_of
from webhooks import selectors, services
from webhooks.exceptions import UnknownLabelKey
from webhooks.serializers import (
    DeliveryOut,
    EndpointCreatedOut,
    EndpointCreateIn,
    EndpointOut,
    EndpointUpdateIn,
    PageQueryOfDeliveries,
)

_NEW = "$response.body#/id"


class EndpointsApi(APIView):
    scopes = {"GET": "read", "POST": "admin"}
    errors = {"POST": [UnknownLabelKey]}
    links = {
        "POST": {
            "UpdateWebhook": link("updateWebhook", "Change it.", endpoint_id=_NEW),
            "DeleteWebhook": link("deleteWebhook", "Delete it.", endpoint_id=_NEW),
            "ListWebhookDeliveries": link(
                "listWebhookDeliveries", "Its delivery log.", endpoint_id=_NEW
            ),
            "TestWebhook": link("testWebhook", "Send it a webhook.test event.", endpoint_id=_NEW),
        }
    }
    tags = ["Webhooks"]
    query = {"GET": PageQueryOfDeliveries}

    @extend_schema(
        operation_id="listWebhooks",
        summary="List webhook endpoints",
        description="The workspace's endpoints with their event, inbox and label filters. The "
        "signing secret is never listed: it is in the create response only.",
        responses=page_of(EndpointOut),
    )
    def get(self, request: Request) -> Response:
        query = parse_query(PageQueryOfDeliveries, request)
        return page_response(selectors.endpoint_list(request.auth.workspace), query, EndpointOut)

    @extend_schema(
        operation_id="createWebhook",
        summary="Create a webhook endpoint",
        request=EndpointCreateIn,
        responses=EndpointCreatedOut,
        description="Creates an endpoint; `secret` (whsec_…) is in this response only. URLs that "
        "resolve to private, loopback or link-local addresses are refused unless the instance "
        "allows them (WEBHOOK_ALLOW_PRIVATE_TARGETS).",
    )
    def post(self, request: Request) -> Response:
        body = EndpointCreateIn(data=request.data)
        body.is_valid(raise_exception=True)
        workspace = request.auth.workspace
        endpoint, secret = services.endpoint_create(
            workspace=workspace,
            by=actor_of(request),
            **selectors.endpoint_filters_check(workspace, dict(body.validated_data)),
        )
        return Response({**EndpointOut(endpoint).data, "secret": secret})


class EndpointApi(APIView):
    scopes = {"PATCH": "admin", "DELETE": "admin"}
    errors = {"PATCH": [UnknownLabelKey]}
    tags = ["Webhooks"]

    @extend_schema(
        operation_id="updateWebhook",
        summary="Update a webhook endpoint",
        description="Changes the fields given; the signing secret stays. `inbox_ids` take inbox "
        "ids or addresses; a `label_keys` entry naming no label is 400 unknown_label.",
        request=EndpointUpdateIn,
        responses=EndpointOut,
    )
    def patch(self, request: Request, endpoint_id: str) -> Response:
        workspace = request.auth.workspace
        endpoint = selectors.endpoint_get(workspace, endpoint_id)
        body = EndpointUpdateIn(data=request.data)
        body.is_valid(raise_exception=True)
        endpoint = services.endpoint_update(
            endpoint=endpoint,
            by=actor_of(request),
            **selectors.endpoint_filters_check(workspace, dict(body.validated_data)),
        )
        return Response(EndpointOut(endpoint).data)

    @extend_schema(
        operation_id="deleteWebhook",
        summary="Delete a webhook endpoint",
        description="Deletes the endpoint with its delivery log; no further events are sent to it.",
        responses={200: DeletedOut},
    )
    def delete(self, request: Request, endpoint_id: str) -> Response:
        endpoint = selectors.endpoint_get(request.auth.workspace, endpoint_id)
        deleted_id = endpoint.pk
        services.endpoint_delete(endpoint=endpoint, by=actor_of(request))
        return Response({"deleted": True, "id": deleted_id})


class DeliveriesApi(APIView):
    scopes = {"GET": "read"}
    tags = ["Webhooks"]
    query = {"GET": PageQueryOfDeliveries}

    @extend_schema(
        operation_id="listWebhookDeliveries",
        summary="List an endpoint's deliveries",
        responses=page_of(DeliveryOut),
        description="The delivery log, newest first, with every attempt.",
    )
    def get(self, request: Request, endpoint_id: str) -> Response:
        query = parse_query(PageQueryOfDeliveries, request)
        endpoint = selectors.endpoint_get(request.auth.workspace, endpoint_id)
        return page_response(selectors.delivery_list(endpoint), query, DeliveryOut)


class ReplayApi(APIView):
    scopes = {"POST": "admin"}
    tags = ["Webhooks"]

    @extend_schema(
        operation_id="replayWebhookDelivery",
        summary="Replay a delivery",
        request=None,
        responses=DeliveryOut,
        description="Sends the same delivery again: same id and body, a new timestamp and "
        "signature, a new series of attempts.",
    )
    def post(self, request: Request, endpoint_id: str, delivery_id: str) -> Response:
        endpoint = selectors.endpoint_get(request.auth.workspace, endpoint_id)
        delivery = services.replay(delivery=selectors.delivery_get(endpoint, delivery_id))
        return Response(DeliveryOut(selectors.delivery_get(endpoint, delivery.pk)).data)


class TestApi(APIView):
    scopes = {"POST": "admin"}
    links = {
        "POST": {
            "ReplayWebhookDelivery": link(
                "replayWebhookDelivery",
                "Send the same delivery again.",
                endpoint_id="$response.body#/endpoint_id",
                delivery_id="$response.body#/id",
            )
        }
    }
    tags = ["Webhooks"]

    @extend_schema(
        operation_id="testWebhook",
        summary="Send a test event to an endpoint",
        request=None,
        responses=DeliveryOut,
        description="Queues a `webhook.test` event to this endpoint; it appears in the log.",
    )
    def post(self, request: Request, endpoint_id: str) -> Response:
        endpoint = selectors.endpoint_get(request.auth.workspace, endpoint_id)
        delivery = services.send_test(endpoint=endpoint)
        return Response(DeliveryOut(selectors.delivery_get(endpoint, delivery.pk)).data)
