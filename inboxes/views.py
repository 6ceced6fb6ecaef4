"""Dashboard pages of the inboxes app: the inbox list, create, lifetime, delete and domains.

Thin views: a form, one selector or service of this app (the same the API calls), a render;
coded errors become flash notices or form errors. What a role may do follows the API scopes of
a dashboard session (``apikeys.dashboard.may`` asks ``apikeys.models.ROLE_SCOPES``): writes need
``write``, managing domains needs ``admin``. The inbox page itself (its emails) lives in
``mail.views``.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from apikeys.audit import actor_of
from apikeys.dashboard import may, member_required, refuse
from apikeys.models import ROLE_SCOPES
from apikeys.principal import Principal
from config.api.errors import ApiError, NotFound
from config.api.pagination import paginate
from inboxes import selectors, services
from inboxes.forms import (
    DomainAddForm,
    DomainCatchAllForm,
    InboxCreateForm,
    InboxFaultsForm,
    InboxLifetimeForm,
    InboxSearchForm,
    SmtpCredentialForm,
)
from inboxes.models import CheckResult, Inbox, Source

PAGE_SIZE = 25


def inbox_or_404(request: HttpRequest, inbox_id: str) -> Inbox:
    """The workspace's inbox, else the 404 page (whatever the reason)."""
    try:
        return selectors.inbox_get(request.membership.workspace, inbox_id)  # type: ignore[attr-defined]
    except NotFound:
        raise Http404("No such inbox.") from None


@member_required()
def inbox_list(request: HttpRequest) -> HttpResponse:
    """Search, filter and page through the workspace's inboxes."""
    workspace = request.membership.workspace  # type: ignore[attr-defined]
    search = InboxSearchForm(request.GET)
    q, status = search.filters()
    try:
        rows, next_cursor = paginate(
            selectors.inbox_search(workspace, q=q, status=status),
            limit=PAGE_SIZE,
            cursor=request.GET.get("cursor") or None,
        )
    except ApiError:
        messages.error(request, "That page link is no longer valid; showing the first page.")
        rows, next_cursor = paginate(
            selectors.inbox_search(workspace, q=q, status=status), limit=PAGE_SIZE, cursor=None
        )
    context = {
        "search": search,
        "q": q,
        "status": status,
        "inboxes": rows,
        "next_cursor": next_cursor,
        "paged": bool(request.GET.get("cursor")),
        "can_write": may(request, "write"),
        "filtered": bool(q) or status != "active",
        "any_inbox": bool(rows) or selectors.inbox_list(workspace, include_expired=True).exists(),
        "base_url": request.build_absolute_uri("/").rstrip("/"),
    }
    return render(request, "inboxes/list.html", context)


@member_required()
def inbox_create(request: HttpRequest) -> HttpResponse:
    """The create form (GET) and its submission (POST), through ``services.inbox_create``."""
    if not may(request, "write"):
        return refuse(request, "create inboxes")
    workspace = request.membership.workspace  # type: ignore[attr-defined]
    role = request.membership.role  # type: ignore[attr-defined]
    form = InboxCreateForm(request.POST or None, workspace=workspace)
    if request.method == "POST" and form.is_valid():
        # The member is who sets forward_to, with the API scopes of their role.
        member = Principal(
            workspace=workspace, scopes=ROLE_SCOPES[role], user=request.user, role=role
        )
        try:
            inbox = services.inbox_create(
                workspace=workspace,
                source=Source.DASHBOARD,
                principal=member,
                **form.service_fields,
            )
        except ApiError as error:
            field = (error.issues or [{}])[0].get("path", "")
            if field in form.fields:
                form.add_error(field, error.message)
            elif error.code in {"invalid_domain", "no_domain"}:
                form.add_error("domain", error.message)
            elif error.code == "address_taken":
                form.add_error("local_part", error.message)
            else:
                form.add_error(None, error.message)
        else:
            messages.success(request, f"Created {inbox.address}.")
            return redirect("inbox_detail", inbox_id=inbox.pk)
    return render(request, "inboxes/create.html", {"form": form})


@require_POST
@member_required()
def inbox_lifetime(request: HttpRequest, inbox_id: str) -> HttpResponse:
    """Extends the expiry (or starts one on a permanent inbox) or makes the inbox permanent."""
    if not may(request, "write"):
        return refuse(request, "change inboxes")
    inbox = inbox_or_404(request, inbox_id)
    form = InboxLifetimeForm(request.POST)
    back = request.POST.get("next") or reverse("inbox_detail", args=[inbox.pk])
    if not back.startswith("/") or back.startswith("//"):
        back = reverse("inbox_detail", args=[inbox.pk])
    if not form.is_valid() or not (form.cleaned_data["permanent"] or form.cleaned_data["minutes"]):
        messages.error(request, "Choose how long the inbox should live.")
        return redirect(back)
    try:
        if form.cleaned_data["permanent"]:
            services.inbox_update(inbox=inbox, ttl_minutes=None)
            messages.success(request, f"{inbox.address} is now permanent.")
        else:
            minutes = form.cleaned_data["minutes"]
            if inbox.permanent:
                services.inbox_update(inbox=inbox, ttl_minutes=minutes)
            else:
                services.inbox_update(inbox=inbox, extend_minutes=minutes)
            label = dict(form.fields["minutes"].choices).get(minutes, f"{minutes} minutes")
            messages.success(request, f"{inbox.address} now expires in {label}.")
    except ApiError as error:
        messages.error(request, error.message)
    return redirect(back)


@require_POST
@member_required()
def inbox_smtp_faults(request: HttpRequest, inbox_id: str) -> HttpResponse:
    """Replaces the inbox's SMTP fault rules (``smtp_faults``, as PATCH /inboxes/{id} does)."""
    if not may(request, "write"):
        return refuse(request, "change inboxes")
    inbox = inbox_or_404(request, inbox_id)
    form = InboxFaultsForm(request.POST)
    if not form.is_valid():
        for error in form.errors.get("smtp_faults", []):
            messages.error(request, f"SMTP faults not saved: {error}")
    else:
        services.inbox_update(inbox=inbox, smtp_faults=form.cleaned_data["smtp_faults"])
        rules = len(form.cleaned_data["smtp_faults"])
        messages.success(
            request,
            f"{inbox.address}: {rules} SMTP fault rule{'s' if rules != 1 else ''} "
            "(the receiver applies changes within seconds).",
        )
    return redirect(reverse("inbox_detail", args=[inbox.pk]) + "#smtp-faults")


@require_POST
@member_required()
def inbox_delete(request: HttpRequest, inbox_id: str) -> HttpResponse:
    """Deletes the inbox with all its mail."""
    if not may(request, "write"):
        return refuse(request, "delete inboxes")
    inbox = inbox_or_404(request, inbox_id)
    address = inbox.address
    services.inbox_delete(inbox=inbox, by=actor_of(request))
    messages.success(request, f"Deleted {address} and all its mail.")
    return redirect("inbox_list")


# --- sandbox SMTP credentials -------------------------------------------------------------------

# The password of a credential just created waits here for its one display on the inbox's page
# (post/redirect/get: a reload never mints a second one), then is popped.
_CREATED_SMTP_CREDENTIAL = "inboxes.created_smtp_credential"


def smtp_credentials_context(request: HttpRequest, inbox: Inbox) -> dict[str, object]:
    """What the inbox's page shows of its sandbox SMTP credentials: the active ones, the app
    settings, and the password of one created just now (once; the caller must send the page
    with never-cache headers when ``smtp_password`` is set)."""
    credentials = list(selectors.smtp_credential_list(inbox))
    pending = request.session.get(_CREATED_SMTP_CREDENTIAL)
    password, created_id = None, None
    if isinstance(pending, dict) and pending.get("inbox") == inbox.pk:
        request.session.pop(_CREATED_SMTP_CREDENTIAL)
        if any(c.pk == pending.get("id") for c in credentials):
            password, created_id = pending.get("password"), pending.get("id")
    return {
        "smtp_credentials": credentials,
        "smtp_settings": selectors.smtp_settings(),
        "smtp_password": password,
        "smtp_created_id": created_id,
        "smtp_credential_form": SmtpCredentialForm(),
    }


@require_POST
@member_required()
def smtp_credential_create(request: HttpRequest, inbox_id: str) -> HttpResponse:
    """Creates a sandbox SMTP credential (as POST /inboxes/{id}/smtp-credentials); its password
    is shown once, on the inbox's page."""
    if not may(request, "write"):
        return refuse(request, "change inboxes")
    inbox = inbox_or_404(request, inbox_id)
    form = SmtpCredentialForm(request.POST)
    back = reverse("inbox_detail", args=[inbox.pk]) + "#smtp-credentials"
    if not form.is_valid():
        for errors in form.errors.values():
            for error in errors:
                messages.error(request, f"SMTP credential not created: {error}")
        return redirect(back)
    try:
        created = services.smtp_credential_create(
            inbox=inbox, name=form.cleaned_data["name"], by=actor_of(request)
        )
    except ApiError as error:
        messages.error(request, error.message)
        return redirect(back)
    request.session[_CREATED_SMTP_CREDENTIAL] = {
        "inbox": inbox.pk,
        "id": created.credential.pk,
        "password": created.password,
    }
    return redirect(back)


@require_POST
@member_required()
def smtp_credential_revoke(request: HttpRequest, inbox_id: str, credential_id: str) -> HttpResponse:
    """Revokes a sandbox SMTP credential (as DELETE /inboxes/{id}/smtp-credentials/{id})."""
    if not may(request, "write"):
        return refuse(request, "change inboxes")
    inbox = inbox_or_404(request, inbox_id)
    try:
        credential = selectors.smtp_credential_get(inbox, credential_id)
    except NotFound:
        raise Http404("No such SMTP credential.") from None
    services.smtp_credential_revoke(credential=credential, by=actor_of(request))
    messages.success(request, f"Revoked the SMTP credential {credential.username}.")
    return redirect(reverse("inbox_detail", args=[inbox.pk]) + "#smtp-credentials")


# --- domains -----------------------------------------------------------------------------------


def _domains_page(request: HttpRequest, add_form: DomainAddForm | None = None) -> HttpResponse:
    workspace = request.membership.workspace  # type: ignore[attr-defined]
    manages = may(request, "admin")
    context = {
        "domains": selectors.domain_list(workspace),
        "manages": manages,
        "add_form": add_form if add_form is not None else (DomainAddForm() if manages else None),
    }
    return render(request, "inboxes/domains.html", context)


@member_required()
def domain_list(request: HttpRequest) -> HttpResponse:
    """Shared and custom domains; owners and admins also get the forms."""
    return _domains_page(request)


@require_POST
@member_required()
def domain_add(request: HttpRequest) -> HttpResponse:
    """Adds a custom domain (``services.domain_add``)."""
    if not may(request, "admin"):
        return refuse(request, "manage domains")
    form = DomainAddForm(request.POST)
    if not form.is_valid():
        return _domains_page(request, form)
    workspace = request.membership.workspace  # type: ignore[attr-defined]
    name = form.cleaned_data["domain"].strip().lower().rstrip(".")
    if any(d.domain == name for d in selectors.domain_list(workspace)):
        form.add_error("domain", f"{name} is already available to this workspace.")
        return _domains_page(request, form)
    try:
        domain = services.domain_add(
            workspace=workspace,
            domain=name,
            catch_all=form.cleaned_data["catch_all"],
            by=actor_of(request),
        )
    except ApiError as error:
        form.add_error("domain", error.message)
        return _domains_page(request, form)
    if domain.verified:
        messages.success(request, f"Added {domain.domain}.")
    else:
        messages.success(
            request,
            f"Added {domain.domain}. It receives mail once verified: publish the TXT record "
            "shown below, then check it.",
        )
    return redirect("domain_list")


def _custom_domain(request: HttpRequest, name: str) -> str:
    workspace = request.membership.workspace  # type: ignore[attr-defined]
    for row in selectors.domain_list(workspace):
        if row.domain == name and not row.shared:
            return row.domain
    raise Http404("No such custom domain.")


@require_POST
@member_required()
def domain_verify(request: HttpRequest, domain: str) -> HttpResponse:
    """Looks the domain's TXT record up now (``services.domain_check``, as the API does)."""
    if not may(request, "admin"):
        return refuse(request, "manage domains")
    workspace = request.membership.workspace  # type: ignore[attr-defined]
    try:
        row = services.domain_check(domain=selectors.domain_get(workspace, domain))
    except NotFound:
        raise Http404("No such custom domain.") from None
    if row.verified and row.last_check_result == CheckResult.FOUND:
        messages.success(request, f"{row.domain} is verified. {row.last_check_detail}")
    elif row.verified:
        messages.warning(request, f"{row.domain} is verified. {row.last_check_detail}")
    else:
        messages.error(request, f"{row.domain} is not verified. {row.last_check_detail}")
    return redirect("domain_list")


@require_POST
@member_required()
def domain_catch_all(request: HttpRequest, domain: str) -> HttpResponse:
    """Switches catch-all on or off (``services.domain_add`` is idempotent and sets it)."""
    if not may(request, "admin"):
        return refuse(request, "manage domains")
    name = _custom_domain(request, domain)
    form = DomainCatchAllForm(request.POST)
    form.is_valid()
    catch_all = bool(form.cleaned_data.get("catch_all"))
    services.domain_add(
        workspace=request.membership.workspace,  # type: ignore[attr-defined]
        domain=name,
        catch_all=catch_all,
        by=actor_of(request),
    )
    messages.success(request, f"Catch-all is {'on' if catch_all else 'off'} for {name}.")
    return redirect("domain_list")


@require_POST
@member_required()
def domain_remove(request: HttpRequest, domain: str) -> HttpResponse:
    """Removes a custom domain no inbox uses."""
    if not may(request, "admin"):
        return refuse(request, "manage domains")
    name = _custom_domain(request, domain)
    try:
        services.domain_remove(
            workspace=request.membership.workspace,  # type: ignore[attr-defined]
            domain=name,
            by=actor_of(request),
        )
    except ApiError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Removed {name}.")
    return redirect("domain_list")
