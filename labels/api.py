"""/labels, /labels/test and /labels/{key}/examples."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikeys.audit import actor_of
from config.api.errors import FeatureDisabled, NotFound
from config.api.pagination import decode_cursor, encode_cursor, page_body, page_response
from config.api.query import parse_query
from config.api.schema import link, page_of
from labels import selectors, services
from labels.classifier.base import facts_of
from labels.exceptions import LabelExists
from labels.models import Label
from labels.serializers import (
    LabelCreateIn,
    LabelDeletedOut,
    LabelExampleDeletedOut,
    LabelExampleIn,
    LabelExampleListQuery,
    LabelExampleOut,
    LabelListQuery,
    LabelOut,
    LabelTestIn,
    LabelTestOut,
    LabelUpdateIn,
    example_record,
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


EXAMPLES_DOC = (
    "The label's training examples for the built-in classifier: explicit yes / no answers given "
    "here (or with the dashboard's buttons), labels people put on emails (yes) and classifier "
    "labels people took off (no). One example per email: the latest decision wins. The newest "
    "50 of each answer take part in every classification of the label (docs/api.md, Labels)."
)


class LabelExamplesApi(APIView):
    # Examples change what the classifier answers for everyone, like a manual label: write.
    # Reading them shows email subjects and senders, which read already shows.
    scopes = {"GET": "read", "POST": "write"}
    errors = {"GET": [NotFound], "POST": [NotFound]}
    tags = ["Labels"]
    query = {"GET": LabelExampleListQuery}

    @extend_schema(
        operation_id="listLabelExamples",
        summary="List a label's examples",
        description=EXAMPLES_DOC + " Newest first. 404 not_found for an unknown label key.",
        responses=page_of(LabelExampleOut),
    )
    def get(self, request: Request, key: str) -> Response:
        query = parse_query(LabelExampleListQuery, request)
        label = selectors.label_get(request.auth.workspace, key)
        after = decode_cursor(query["cursor"]) if query.get("cursor") else None
        rows, last = selectors.example_page(label, limit=query["limit"], after=after)
        data = LabelExampleOut([example_record(row) for row in rows], many=True).data
        return Response(page_body(data, encode_cursor(last) if last else None))

    @extend_schema(
        operation_id="addLabelExample",
        summary="Teach a label: yes or no for one email",
        description=EXAMPLES_DOC + " Records `answer` for the stored email `email_id` (404 "
        "not_found when the workspace has no such email or label). The email's labels stay as "
        "they are; a `no` also keeps the classifier from applying the label to that email. "
        "Audited as `label.example_added`.",
        request=LabelExampleIn,
        responses=LabelExampleOut,
    )
    def post(self, request: Request, key: str) -> Response:
        body = LabelExampleIn(data=request.data)
        body.is_valid(raise_exception=True)
        workspace = request.auth.workspace
        label = selectors.label_get(workspace, key)
        email = mail_selectors.email_get(workspace, body.validated_data["email_id"])
        row = services.example_add(
            label=label,
            email_id=email.pk,
            facts=facts_of(email),
            answer=body.validated_data["answer"] == "yes",
            by=actor_of(request),
        )
        return Response(LabelExampleOut(example_record(row)).data)


class LabelExampleApi(APIView):
    scopes = {"DELETE": "write"}
    errors = {"DELETE": [NotFound]}
    tags = ["Labels"]

    @extend_schema(
        operation_id="deleteLabelExample",
        summary="Forget one of a label's examples",
        description="Removes the example (explicit, or made by a manual label or a removal) "
        "from the label's training examples; the email's labels stay as they are. Audited as "
        "`label.example_removed`.",
        responses={200: LabelExampleDeletedOut},
    )
    def delete(self, request: Request, key: str, example_id: str) -> Response:
        label = selectors.label_get(request.auth.workspace, key)
        example = selectors.example_get(label, example_id)
        services.example_remove(example=example, by=actor_of(request))
        return Response({"deleted": True, "id": example_id})
