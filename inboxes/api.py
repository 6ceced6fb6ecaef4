"""/domains and /inboxes."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api.pagination import page_body
from config.api.schema import page_of
from inboxes import selectors
from inboxes.serializers import DomainOut


class DomainsApi(APIView):
    scopes = {"GET": "read"}
    tags = ["Organization"]

    @extend_schema(
        operation_id="listDomains",
        responses=page_of(DomainOut),
        description="Domains available for new inboxes: shared ones, then the workspace's own. "
        "Always a single page.",
    )
    def get(self, request: Request) -> Response:
        rows = selectors.domain_list(request.auth.workspace)
        return Response(page_body(DomainOut(rows, many=True).data, None))
