"""/labels and /labels/test."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikeys.audit import actor_of
from config.api.errors import FeatureDisabled, NotFound
from config.api.pagination import page_response
from config.api.query import parse_query
from config.api.schema import link, page_of
from labels import selectors, services
from labels.exceptions import LabelExists
from labels.models import Label
from labels.serializers import (
    LabelCreateIn,
    LabelDeletedOut,
    LabelListQuery,
    LabelOut,
    LabelTestIn,
    LabelTestOut,
    LabelUpdateIn,
)
from mail import selectors as mail_selectors


class LabelsApi(APIView):
    scopes = {"GET": "read", "POST": "admin"}
    errors = {"POST": [LabelExists, FeatureDisabled]}
    links = {
        "POST": {
            "UpdateLabel": link("updateLabel", "Change it.", key="$response.body#/key"),
            "DeleteLabel": link("deleteLabel", "Delete it.", key="$response.body#/key"),
        }
    }
    tags = ["Labels"]
    query = {"GET": LabelListQuery}

    @extend_schema(
        operation_id="listLabels",
        summary="List labels",
        description="The workspace's label definitions: key, name, colour, classifier "
        "instructions and threshold, rules and whether each is enabled.",
        responses=page_of(LabelOut),
    )
    def get(self, request: Request) -> Response:
        query = parse_query(LabelListQuery, request)
        return page_response(selectors.label_list(request.auth.workspace), query, LabelOut)

    @extend_schema(
        operation_id="createLabel",
        summary="Create a label",
        request=LabelCreateIn,
        responses=LabelOut,
        description="409 label_exists when the key is taken; 403 feature_disabled for "
        "instructions while the workspace's classifier is off.",
    )
    def post(self, request: Request) -> Response:
        body = LabelCreateIn(data=request.data)
        body.is_valid(raise_exception=True)
        label = services.label_create(
            workspace=request.auth.workspace, by=actor_of(request), **body.validated_data
        )
        return Response(LabelOut(label).data)


class LabelApi(APIView):
    scopes = {"PATCH": "admin", "DELETE": "admin"}
    errors = {"PATCH": [FeatureDisabled]}
    tags = ["Labels"]

    @extend_schema(
        operation_id="updateLabel",
        summary="Update a label",
        description="Changes the fields given; the key stays. `rules` replaces the whole rule "
        "set. 403 feature_disabled for non-empty instructions while the workspace's "
        "classifier is off.",
        request=LabelUpdateIn,
        responses=LabelOut,
    )
    def patch(self, request: Request, key: str) -> Response:
        label = selectors.label_get(request.auth.workspace, key)
        body = LabelUpdateIn(data=request.data)
        body.is_valid(raise_exception=True)
        label = services.label_update(label=label, by=actor_of(request), **body.validated_data)
        return Response(LabelOut(label).data)

    @extend_schema(
        operation_id="deleteLabel",
        summary="Delete a label",
        responses={200: LabelDeletedOut},
        description="Deletes the label and removes it from every email.",
    )
    def delete(self, request: Request, key: str) -> Response:
        label = selectors.label_get(request.auth.workspace, key)
        deleted = {"deleted": True, "id": label.pk, "key": label.key}
        services.label_delete(label=label, by=actor_of(request))
        return Response(deleted)


class LabelTestApi(APIView):
    scopes = {"POST": "read"}
    errors = {"POST": [NotFound]}  # `email_id` names no email of the workspace
    tags = ["Labels"]

    @extend_schema(
        operation_id="testLabels",
        summary="Try the labels on a message",
        request=LabelTestIn,
        responses=LabelTestOut,
        description="Runs every enabled label's rules and, where active, the classifier against "
        "`from`/`subject`/`text` or a stored `email_id`; with `label`, that unsaved draft "
        "replaces the saved label of its key. Nothing is stored.",
    )
    def post(self, request: Request) -> Response:
        body = LabelTestIn(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        workspace = request.auth.workspace
        rule_facts, facts = mail_selectors.label_test_facts(workspace, data)
        draft = Label(workspace=workspace, **data["label"]) if data.get("label") else None
        results = services.label_test(
            workspace=workspace, rule_facts=rule_facts, facts=facts, draft=draft
        )
        return Response(LabelTestOut({"results": results}).data)
