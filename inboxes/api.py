"""/domains and /inboxes."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikeys.audit import actor_of
from config.api.errors import FeatureDisabled, LimitReached
from config.api.pagination import cursor_id, page_body, page_response, rows_page
from config.api.query import parse_query
from config.api.schema import DeletedOut, link, page_of
from inboxes import selectors, services
from inboxes.exceptions import AddressTaken, InvalidDomain, NoDomain
from inboxes.models import Source
from inboxes.serializers import (
    DomainOut,
    InboxCreateIn,
    InboxListQuery,
    InboxOut,
    InboxUpdateIn,
    SmtpCredentialCreatedOut,
    SmtpCredentialCreateIn,
    SmtpCredentialListQuery,
    SmtpCredentialOut,
    inbox_rows_out,
)

_NEW_INBOX = "$response.body#/id"
INBOX_LINKS = {
    "GetInbox": link("getInbox", "The inbox just created.", inbox_id=_NEW_INBOX),
    "UpdateInbox": link("updateInbox", "Change or extend it.", inbox_id=_NEW_INBOX),
    "DeleteInbox": link("deleteInbox", "Remove it and its mail.", inbox_id=_NEW_INBOX),
    "SendEmail": link("sendEmail", "Send mail from it.", inbox_id=_NEW_INBOX),
    "ListInboxEmails": link("listInboxEmails", "Its mail.", inbox_id=_NEW_INBOX),
    "WaitForEmail": link("waitForEmail", "Wait for its next email.", inbox_id=_NEW_INBOX),
    "StreamInbox": link("streamInbox", "Follow it live.", inbox_id=_NEW_INBOX),
}
INBOX_ID = OpenApiParameter(
    "inbox_id",
    str,
    OpenApiParameter.PATH,
    description="The inbox id (inb_…) or its full address (case-insensitive; a plus tag, "
    "`alpha+x@…`, names the inbox its mail lands in: `alpha@…`).",
)


class DomainsApi(APIView):
    scopes = {"GET": "read"}
    tags = ["Organization"]

    @extend_schema(
        operation_id="listDomains",
        summary="List domains for new inboxes",
        responses=page_of(DomainOut),
        description="Domains for new inboxes: shared ones, then the workspace's own custom "
        "domains, verified or not (an unverified one shows in `verification` the TXT record to "
        "publish, then POST /domains/{domain}/verify). The default is the first verified "
        "domain. Always a single page.",
    )
    def get(self, request: Request) -> Response:
        rows = selectors.domain_list(request.auth.workspace)
        return Response(page_body(DomainOut(rows, many=True).data, None))


class DomainVerifyApi(APIView):
    scopes = {"POST": "admin"}
    tags = ["Organization"]

    @extend_schema(
        operation_id="verifyDomain",
        summary="Check a custom domain's DNS record now",
        parameters=[
            OpenApiParameter(
                "domain", str, OpenApiParameter.PATH, description="A custom domain's name."
            )
        ],
        request=None,
        responses=DomainOut,
        description="Looks the custom domain's TXT record (`verification.name`, value "
        "`verification.value`) up now and answers the domain with the outcome: `verified` "
        "becomes true once the record is found; `verification.result` and `detail` say what "
        "the lookup saw. A periodic job also re-checks every custom domain "
        "(DOMAIN_RECHECK_MINUTES). An unverified domain receives no mail (550 5.1.1 at RCPT) "
        "and takes no new inboxes (400 invalid_domain). 404 not_found for a name that is not "
        "a custom domain of this workspace (shared domains need no verification).",
    )
    def post(self, request: Request, domain: str) -> Response:
        workspace = request.auth.workspace
        row = services.domain_check(domain=selectors.domain_get(workspace, domain))
        return Response(DomainOut(selectors.domain_info(workspace, row)).data)


class InboxesApi(APIView):
    scopes = {"GET": "read", "POST": "write"}
    errors = {"POST": [AddressTaken, NoDomain, InvalidDomain, FeatureDisabled, LimitReached]}
    links = {"POST": INBOX_LINKS}
    tags = ["Inboxes"]
    query = {"GET": InboxListQuery}

    @extend_schema(
        operation_id="listInboxes",
        summary="List inboxes",
        responses=page_of(InboxOut),
        description="The workspace's inboxes, newest first, filtered by `q` (address, name, "
        "agent or tag), `tag` and `agent`. Expired inboxes are left out unless "
        "include_expired=true.",
    )
    def get(self, request: Request) -> Response:
        query = parse_query(InboxListQuery, request)
        rows = selectors.inbox_page_rows(
            request.auth.workspace,
            q=query.get("q", ""),
            tag=query.get("tag", ""),
            agent=query.get("agent", ""),
            include_expired=query["include_expired"],
            after=cursor_id(query),
            limit=query["limit"] + 1,
        )
        return rows_page(rows, query["limit"], inbox_rows_out)

    @extend_schema(
        operation_id="createInbox",
        summary="Create an inbox",
        request=InboxCreateIn,
        responses=InboxOut,
        description="Creates an inbox; `{}` is valid. 409 address_taken (also for a local part "
        "the instance reserves on its shared domains: RESERVED_LOCAL_PARTS, e.g. postmaster, "
        "abuse, admin), 409 no_domain, 400 invalid_domain (not this workspace's, or a custom "
        "domain not verified yet), 403 feature_disabled (ttl_minutes null without permanent "
        "inboxes), 429 limit_reached (max_inboxes), 403 insufficient_scope (path `forward_to`) "
        "for a `forward_to` outside the workspace's domains without the `send` scope.",
    )
    def post(self, request: Request) -> Response:
        body = InboxCreateIn(data=request.data)
        body.is_valid(raise_exception=True)
        inbox = services.inbox_create(
            workspace=request.auth.workspace,
            source=Source.API,
            principal=request.auth,
            **body.validated_data,
        )
        return Response(InboxOut(inbox).data)


class InboxApi(APIView):
    scopes = {"GET": "read", "PATCH": "write", "DELETE": "write"}
    errors = {"PATCH": [FeatureDisabled]}
    tags = ["Inboxes"]

    @extend_schema(
        operation_id="getInbox",
        summary="Get an inbox",
        description="The inbox by id (`inb_…`) or address (a plus-tagged address names the inbox "
        "its mail lands in), with its counts of emails and unread emails. An expired "
        "inbox stays readable until the workspace's retention grace ends.",
        parameters=[INBOX_ID],
        responses=InboxOut,
    )
    def get(self, request: Request, inbox_id: str) -> Response:
        inbox = selectors.inbox_get(request.auth.workspace, inbox_id)
        return Response(InboxOut(inbox).data)

    @extend_schema(
        operation_id="updateInbox",
        summary="Update an inbox",
        parameters=[INBOX_ID],
        request=InboxUpdateIn,
        responses=InboxOut,
        description="Only the fields given change. `ttl_minutes: null` makes the inbox permanent; "
        "`extend_minutes` moves expiry to now + N (400 on a permanent inbox). Changing "
        "`forward_to` to an address outside the workspace's domains needs the `send` scope "
        "(403 insufficient_scope, path `forward_to`); the caller becomes the forwarding's setter.",
    )
    def patch(self, request: Request, inbox_id: str) -> Response:
        inbox = selectors.inbox_get(request.auth.workspace, inbox_id)
        body = InboxUpdateIn(data=request.data)
        body.is_valid(raise_exception=True)
        inbox = services.inbox_update(inbox=inbox, principal=request.auth, **body.validated_data)
        return Response(InboxOut(inbox).data)

    @extend_schema(
        operation_id="deleteInbox",
        summary="Delete an inbox",
        parameters=[INBOX_ID],
        responses={200: DeletedOut},
        description="Removes the inbox and all its mail, raw messages and attachments.",
    )
    def delete(self, request: Request, inbox_id: str) -> Response:
        inbox = selectors.inbox_get(request.auth.workspace, inbox_id)
        deleted_id = inbox.pk
        services.inbox_delete(inbox=inbox, by=actor_of(request))
        return Response({"deleted": True, "id": deleted_id})


CREDENTIAL_ID = OpenApiParameter(
    "credential_id", str, OpenApiParameter.PATH, description="The credential's id (smc_…)."
)
SANDBOX_HELP = (
    "A sandbox SMTP credential lets an application under test send through the SMTP receiver "
    "with AUTH PLAIN or LOGIN (over STARTTLS or the implicit-TLS port; in plain text only where "
    "`smtp.plaintext_auth` says so) to **any** recipients: each message is stored once in this "
    "inbox, with every envelope recipient in the email's `envelope_recipients`, and goes through "
    "the same pipeline as other mail (extraction, labels, events, webhooks, waits); nothing is "
    "ever relayed. The inbox's `smtp_faults` apply to that mail too, as to mail for its address. "
    "Wrong credentials get `535 5.7.8`; after `SMTP_AUTH_FAILURE_LIMIT` failures from one IP "
    "or for one username within `SMTP_AUTH_FAILURE_WINDOW` seconds, AUTH answers `454 4.7.0` "
    "until the window ends."
)


class SmtpCredentialsApi(APIView):
    scopes = {"GET": "read", "POST": "write"}
    errors = {"POST": [LimitReached]}
    links = {
        "POST": {
            "RevokeSmtpCredential": link(
                "revokeSmtpCredential",
                "Revoke it.",
                inbox_id="$request.path.inbox_id",
                credential_id="$response.body#/id",
            )
        }
    }
    tags = ["Inboxes"]
    query = {"GET": SmtpCredentialListQuery}

    @extend_schema(
        operation_id="listSmtpCredentials",
        summary="List an inbox's sandbox SMTP credentials",
        parameters=[INBOX_ID],
        responses=page_of(SmtpCredentialOut),
        description="The inbox's active credentials, newest first, without passwords (the "
        "password is in the create response only), each with the SMTP settings an "
        "application needs. Revoked credentials are left out. " + SANDBOX_HELP,
    )
    def get(self, request: Request, inbox_id: str) -> Response:
        inbox = selectors.inbox_get(request.auth.workspace, inbox_id)
        query = parse_query(SmtpCredentialListQuery, request)
        return page_response(selectors.smtp_credential_list(inbox), query, SmtpCredentialOut)

    @extend_schema(
        operation_id="createSmtpCredential",
        summary="Create a sandbox SMTP credential",
        parameters=[INBOX_ID],
        request=SmtpCredentialCreateIn,
        responses=SmtpCredentialCreatedOut,
        description="Creates a username and password for SMTP AUTH; the password is in "
        "`password`, in this response only (only its digest is stored). `smtp` gives the host, "
        "ports and TLS to configure. 429 limit_reached beyond 10 active credentials per inbox. "
        + SANDBOX_HELP,
    )
    def post(self, request: Request, inbox_id: str) -> Response:
        inbox = selectors.inbox_get(request.auth.workspace, inbox_id)
        body = SmtpCredentialCreateIn(data=request.data)
        body.is_valid(raise_exception=True)
        created = services.smtp_credential_create(
            inbox=inbox, name=body.validated_data["name"], by=actor_of(request)
        )
        return Response(
            {**SmtpCredentialOut(created.credential).data, "password": created.password}
        )


class SmtpCredentialApi(APIView):
    scopes = {"DELETE": "write"}
    tags = ["Inboxes"]

    @extend_schema(
        operation_id="revokeSmtpCredential",
        summary="Revoke a sandbox SMTP credential",
        parameters=[INBOX_ID, CREDENTIAL_ID],
        responses={200: DeletedOut},
        description="Revokes the credential at once: the next AUTH with it gets `535 5.7.8`, "
        "and a message of a session that authenticated with it before is refused (`550 5.7.8`) "
        "rather than stored. 404 not_found for a credential that is not this inbox's or is "
        "revoked already.",
    )
    def delete(self, request: Request, inbox_id: str, credential_id: str) -> Response:
        inbox = selectors.inbox_get(request.auth.workspace, inbox_id)
        credential = selectors.smtp_credential_get(inbox, credential_id)
        services.smtp_credential_revoke(credential=credential, by=actor_of(request))
        return Response({"deleted": True, "id": credential.pk})
