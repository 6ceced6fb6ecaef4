"""/inboxes/{id}/emails, /emails, /emails/{id} (+ raw and attachments)."""

from __future__ import annotations

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpResponse, StreamingHttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api.errors import NotFound
from config.api.pagination import page_response
from config.api.query import parse_query
from config.api.schema import DeletedOut, link, page_of
from inboxes import selectors as inbox_selectors
from labels.exceptions import UnknownLabel
from mail import selectors, services
from mail.serializers import (
    AllEmailsQuery,
    EmailListQuery,
    EmailOut,
    EmailReadQuery,
    EmailSummaryOut,
    EmailUpdateIn,
    email_record_out,
)

INBOX_ID = OpenApiParameter(
    "inbox_id",
    str,
    OpenApiParameter.PATH,
    description="The inbox id (inb_…) or its full address (case-insensitive; a plus tag, "
    "`alpha+x@…`, names the inbox its mail lands in: `alpha@…`).",
)


_FIRST = "$response.body#/data/0/id"
# A list's first email feeds the email operations (when the list is not empty).
LIST_LINKS = {
    "GetEmail": link("getEmail", "The first email of the page.", email_id=_FIRST),
    "UpdateEmail": link("updateEmail", "Mark or label it.", email_id=_FIRST),
    "DeleteEmail": link("deleteEmail", "Delete it.", email_id=_FIRST),
    "GetEmailRaw": link("getEmailRaw", "Its raw message.", email_id=_FIRST),
}


def _list(request: Request, query: dict, inbox_ref: str | None) -> Response:
    workspace = request.auth.workspace
    inbox = inbox_selectors.inbox_get(workspace, inbox_ref) if inbox_ref else None
    rows = selectors.email_list(
        workspace,
        inbox=inbox,
        q=query.get("q", ""),
        label=query.get("label", ""),
        unread=query.get("unread"),
        since=query.get("since"),
    )
    with selectors.search_time_limit(query.get("q", "")):
        return page_response(rows, query, EmailSummaryOut)


def _download(content: bytes, content_type: str, filename: str) -> HttpResponse:
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = content_disposition_header(True, filename)
    # Never let a browser run an attachment as a page of ours.
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response


class InboxEmailsApi(APIView):
    scopes = {"GET": "read"}
    errors = {"GET": [UnknownLabel]}  # `label` names no label of the workspace
    links = {"GET": LIST_LINKS}
    tags = ["Emails"]
    query = {"GET": EmailListQuery}

    @extend_schema(
        operation_id="listInboxEmails",
        summary="List an inbox's emails",
        parameters=[INBOX_ID],
        responses=page_of(EmailSummaryOut),
        description="The inbox's mail, newest first, filtered by `q` (a search language: "
        "words, quoted phrases and operators such as `from:`, `has:code`, `is:unread`, "
        "`-` to negate; see the parameter), `label`, `unread` and `since`. List entries carry "
        "a preview; getEmail has the full record.",
    )
    def get(self, request: Request, inbox_id: str) -> Response:
        return _list(request, parse_query(EmailListQuery, request), inbox_id)


class EmailsApi(APIView):
    scopes = {"GET": "read"}
    # `inbox` names no inbox of the workspace; `label` no label of it
    errors = {"GET": [NotFound, UnknownLabel]}
    links = {"GET": LIST_LINKS}
    tags = ["Emails"]
    query = {"GET": AllEmailsQuery}

    @extend_schema(
        operation_id="listEmails",
        summary="List emails across inboxes",
        responses=page_of(EmailSummaryOut),
        description="Mail of every inbox of the workspace (or of `inbox`), newest first, "
        "filtered like listInboxEmails; `q` searches whole bodies, and `inbox:` in it names an "
        "inbox too.",
    )
    def get(self, request: Request) -> Response:
        query = parse_query(AllEmailsQuery, request)
        return _list(request, query, query.get("inbox") or None)


class EmailApi(APIView):
    scopes = {"GET": "read", "PATCH": "write", "DELETE": "write"}
    errors = {"PATCH": [UnknownLabel]}
    links = {
        "GET": {
            "GetEmailAttachment": link(
                "getEmailAttachment",
                "Its first attachment.",
                email_id="$response.body#/id",
                attachment_id="$response.body#/attachments/0/id",
            )
        }
    }
    tags = ["Emails"]
    query = {"GET": EmailReadQuery}

    @extend_schema(
        operation_id="getEmail",
        summary="Get an email",
        description="The full record: text and HTML bodies, headers, attachments, labels, the "
        "read and starred flags and `extracted` (verification codes and links). "
        "`mark_read=true` marks the email read as it is fetched.",
        responses=EmailOut,
    )
    def get(self, request: Request, email_id: str) -> Response:
        query = parse_query(EmailReadQuery, request)
        record = selectors.email_record(request.auth.workspace, email_id)
        if query["mark_read"]:
            services.email_mark_read(email=record.email)
        return Response(email_record_out(record))

    @extend_schema(
        operation_id="updateEmail",
        summary="Mark, star or label an email",
        request=EmailUpdateIn,
        responses=EmailOut,
        description="Sets read/starred; `labels` replaces the manual labels (400 unknown_label).",
    )
    def patch(self, request: Request, email_id: str) -> Response:
        email = selectors.email_get(request.auth.workspace, email_id)
        body = EmailUpdateIn(data=request.data)
        body.is_valid(raise_exception=True)
        services.email_update(email=email, **body.validated_data)
        return Response(EmailOut(selectors.email_get(request.auth.workspace, email_id)).data)

    @extend_schema(
        operation_id="deleteEmail",
        summary="Delete an email",
        description="Deletes the email with its raw message and attachments; the inbox's stream "
        "gets `email.deleted`.",
        responses={200: DeletedOut},
    )
    def delete(self, request: Request, email_id: str) -> Response:
        email = selectors.email_get(request.auth.workspace, email_id)
        services.email_delete(email=email)
        return Response({"deleted": True, "id": email_id})


class EmailRawApi(APIView):
    scopes = {"GET": "read"}
    tags = ["Emails"]

    @extend_schema(
        operation_id="getEmailRaw",
        summary="Download the raw message",
        responses={(200, "message/rfc822"): OpenApiResponse(OpenApiTypes.BINARY)},
        description="The message exactly as received, as an .eml download.",
    )
    def get(self, request: Request, email_id: str) -> HttpResponse:
        content = selectors.email_raw(request.auth.workspace, email_id)
        return _download(content, "message/rfc822", f"{email_id}.eml")


class InboxExportApi(APIView):
    scopes = {"GET": "read"}
    tags = ["Inboxes"]

    @extend_schema(
        operation_id="exportInbox",
        summary="Export an inbox as an mbox file",
        parameters=[INBOX_ID],
        responses={(200, "application/mbox"): OpenApiResponse(OpenApiTypes.BINARY)},
        description="Every email of the inbox, oldest first, as an mbox file (the mboxrd "
        "variant: each raw message exactly as received after a `From <envelope sender> "
        "<date>` line, lines starting with `From ` quoted as `>From `, an empty line after "
        "each message). Streamed as it is read, whatever the size of the inbox.",
    )
    def get(self, request: Request, inbox_id: str) -> StreamingHttpResponse:
        workspace = request.auth.workspace
        inbox = inbox_selectors.inbox_get(workspace, inbox_id)
        # Under daphne (ASGI) an async iterator, so that Django sends each part as it is read;
        # under WSGI a plain one. Either way, one batch of messages in memory at a time.
        asgi = isinstance(request._request, ASGIRequest)
        parts = (selectors.inbox_mbox_async if asgi else selectors.inbox_mbox)(workspace, inbox)
        response = StreamingHttpResponse(parts, content_type="application/mbox")
        response["Content-Disposition"] = content_disposition_header(True, f"{inbox.address}.mbox")
        response["Content-Security-Policy"] = "default-src 'none'; sandbox"
        return response


class EmailAttachmentApi(APIView):
    scopes = {"GET": "read"}
    tags = ["Emails"]

    @extend_schema(
        operation_id="getEmailAttachment",
        summary="Download an attachment",
        # `*/*`: the response carries the type the sender declared (image/png, text/calendar,
        # ...), application/octet-stream only when it declared none.
        responses={
            (200, "*/*"): OpenApiResponse(
                OpenApiTypes.BINARY,
                description="The attachment's bytes, with the content type its sender declared "
                "(`application/octet-stream` when none).",
            )
        },
        description="The attachment's bytes with its content type, as a download.",
    )
    def get(self, request: Request, email_id: str, attachment_id: str) -> HttpResponse:
        attachment = selectors.attachment_get(request.auth.workspace, email_id, attachment_id)
        return _download(
            selectors.attachment_content(request.auth.workspace, attachment),
            attachment.content_type or "application/octet-stream",
            attachment.filename or f"{attachment.pk}.bin",
        )
