"""Dashboard pages of the mail app: an inbox's emails (live), one email, its sanitised HTML,
its raw source and its attachments.

Thin views over the same selectors and services as the emails API (``mail.selectors``,
``mail.services.email_update`` / ``email_mark_read`` / ``email_delete``). The message's HTML is
never put into a dashboard page: it is sanitised by :mod:`mail.message.sanitize` and served from
its own route with its own strict Content-Security-Policy, inside a sandboxed frame without
scripts.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.http import content_disposition_header, url_has_allowed_host_and_scheme
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.http import require_POST

from apikeys.audit import actor_of
from apikeys.dashboard import may, member_required, refuse
from config.api.errors import ApiError, NotFound, ValidationFailed
from config.api.pagination import paginate
from inboxes.forms import LIFETIMES, InboxLifetimeForm
from inboxes.views import inbox_or_404, smtp_credentials_context
from labels import selectors as label_selectors
from labels import services as label_services
from labels.classifier.base import facts_of
from mail import selectors, services
from mail.forms import EmailReadForm, EmailSearchForm, LabelAddForm
from mail.message import sanitize
from mail.models import Email

PAGE_SIZE = 50
RAW_PREVIEW_BYTES = 256 * 1024
# Attachment types a browser may be told as they are; anything else is application/octet-stream.
SAFE_DOWNLOAD_TYPES = frozenset(
    {
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "application/pdf",
        "text/plain",
        "text/csv",
        "application/zip",
        "application/json",
        "text/calendar",
    }
)
STREAM_EVENTS = "email.received email.updated email.deleted email.labeled"


def _email_or_404(request: HttpRequest, email_id: str) -> Email:
    try:
        return selectors.email_get(request.membership.workspace, email_id)  # type: ignore[attr-defined]
    except NotFound:
        raise Http404("No such email.") from None


def _back(request: HttpRequest, fallback: str) -> str:
    target = request.POST.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return target
    return fallback


@member_required()
def inbox_detail(request: HttpRequest, inbox_id: str) -> HttpResponse:
    """The inbox's emails, newest first; the list re-renders live on stream events."""
    inbox = inbox_or_404(request, inbox_id)
    search = EmailSearchForm(request.GET)
    q, unread = "", None
    search_error = ""
    if search.is_valid():
        q = search.cleaned_data["q"].strip()
        unread = True if search.cleaned_data["unread"] else None
    else:  # e.g. over 200 characters: said, never silently a list of everything
        search_error = next(iter(search.errors.values()))[0]
    # The list fields plus ``extracted`` for the code badge (one query, no per-row loads).
    # ``q`` is the API's query language (mail.query); a malformed one is said above the list.
    try:
        rows_query = selectors.email_list(
            request.membership.workspace,  # type: ignore[attr-defined]
            inbox=inbox,
            q=q,
            unread=unread,
        ).only(*selectors.LIST_FIELDS, "extracted")
        if search_error:
            rows_query = rows_query.none()
    except ValidationFailed as exc:
        search_error = (exc.issues or [{"message": exc.message}])[0]["message"]
        rows_query = selectors.email_list(
            request.membership.workspace,  # type: ignore[attr-defined]
            inbox=inbox,
        ).none()
    try:
        with selectors.search_time_limit(q if not search_error else ""):
            rows, next_cursor = paginate(
                rows_query, limit=PAGE_SIZE, cursor=request.GET.get("cursor") or None
            )
    except ValidationFailed as exc:  # the search ran out of time
        search_error = (exc.issues or [{"message": exc.message}])[0]["message"]
        rows, next_cursor = [], None
    except ApiError:
        raise Http404("No such page.") from None
    context = {
        "inbox": inbox,
        "emails": rows,
        "next_cursor": next_cursor,
        "paged": bool(request.GET.get("cursor")),
        "search": search,
        "search_error": search_error,
        "filtered": bool(q) or bool(unread),
        "can_write": may(request, "write"),
        "lifetime_form": InboxLifetimeForm(),
        "lifetimes": LIFETIMES,
        "smtp_faults_json": json.dumps(inbox.smtp_faults, indent=2) if inbox.smtp_faults else "",
        "allow_permanent": request.membership.workspace.allow_permanent_inboxes,  # type: ignore[attr-defined]
        "stream_url": f"/api/v1/inboxes/{inbox.pk}/stream",
        "stream_events": STREAM_EVENTS,
        **smtp_credentials_context(request, inbox),
    }
    response = render(request, "mail/inbox.html", context)
    if context["smtp_password"]:
        add_never_cache_headers(response)  # the back button must not bring the password back
    return response


def _label_rows(email: Email) -> tuple[list[dict], list[tuple[str, str]]]:
    labels = {lbl.key: lbl for lbl in label_selectors.label_list(email.workspace)}
    applied = [
        {
            "key": row.key,
            "name": labels[row.key].name if row.key in labels else row.key,
            "color": labels[row.key].color if row.key in labels else "slate",
            "source": row.source,
            "confidence": row.confidence,
        }
        for row in email.email_labels.all()
    ]
    on_email = {row["key"] for row in applied}
    addable = [(key, label.name) for key, label in labels.items() if key not in on_email]
    return applied, addable


def _teach_rows(email: Email) -> list[dict]:
    """The classifier's labels with this email's example for each (its yes / no buttons)."""
    examples = label_selectors.examples_of_email(email.workspace, email.pk)
    rows = []
    for label in label_selectors.classifier_labels(email.workspace):
        example = examples.get(label.key)
        rows.append(
            {
                "key": label.key,
                "name": label.name,
                "question": label.instructions,
                "answer": ("yes" if example.positive else "no") if example else "",
                "source": example.source if example else "",
                "example_id": example.public_id if example else "",
            }
        )
    return sorted(rows, key=lambda row: row["key"])


@member_required()
def email_detail(request: HttpRequest, email_id: str) -> HttpResponse:
    """One email; opening it marks it read (as ``GET /emails/{id}?mark_read=true``)."""
    email = _email_or_404(request, email_id)
    if not email.read:
        services.email_mark_read(email=email)
    show_images = request.GET.get("images") == "1"
    safe = sanitize.sanitize_html(email.html, remote_images=show_images) if email.html else None
    applied, addable = _label_rows(email)
    teach = _teach_rows(email)
    raw = selectors.email_raw(request.membership.workspace, email.pk)  # type: ignore[attr-defined]
    extracted = email.extracted or {}
    context = {
        "email": email,
        "inbox": email.inbox,
        "labels": applied,
        "label_form": LabelAddForm(choices=addable) if addable else None,
        "teach": teach,
        "can_write": may(request, "write"),
        "code": extracted.get("code"),
        "link": extracted.get("link"),
        "codes": extracted.get("codes") or [],
        "links": extracted.get("links") or [],
        "has_html": bool(email.html),
        "show_images": show_images,
        "blocked_images": safe.blocked_images if safe else 0,
        "remote_images": len(safe.remote_images) if safe else 0,
        "html_src": reverse("email_html", args=[email.pk]) + ("?images=1" if show_images else ""),
        "html_measure_src": reverse("email_html", args=[email.pk]) + "?measure=1",
        "frame_sandbox": sanitize.FRAME_SANDBOX,
        "measure_sandbox": sanitize.MEASURE_SANDBOX,
        "raw_text": raw[:RAW_PREVIEW_BYTES].decode("utf-8", "replace"),
        "raw_truncated": len(raw) > RAW_PREVIEW_BYTES,
        "attachments": list(email.attachments.all()),
        "auth_badges": auth_badges(email.authentication),
    }
    return render(request, "mail/email.html", context)


_TONES = {"pass": "ok", "fail": "danger", "permerror": "danger", "none": "muted"}


def auth_badges(authentication: dict | None) -> list[dict[str, str]]:
    """The email page's badges of its authentication verdict: one per mechanism (DKIM: per
    signature), its result, and a title saying for which domain and why."""
    if not authentication:
        return []
    badges = []

    def badge(name: str, entry: dict, detail: str) -> None:
        result = entry.get("result", "")
        reason = entry.get("reason") or ""
        title = "; ".join(part for part in (detail, reason) if part)
        tone = _TONES.get(result, "warn")  # softfail, neutral, temperror
        badges.append({"name": name, "result": result, "tone": tone, "title": title})

    spf = authentication.get("spf") or {}
    badge("SPF", spf, f"{spf.get('identity', '')} {spf.get('domain', '')}".strip())
    signatures = authentication.get("dkim") or []
    for signature in signatures:
        detail = f"d={signature.get('domain', '')} s={signature.get('selector', '')}"
        badge("DKIM", signature, detail)
    if not signatures:
        badge("DKIM", {"result": "none", "reason": "not signed"}, "")
    dmarc = authentication.get("dmarc") or {}
    policy = f"p={dmarc['policy']}" if dmarc.get("policy") else ""
    aligned = "aligned: " + ", ".join(dmarc["alignment"]) if dmarc.get("alignment") else ""
    badge("DMARC", dmarc, " ".join(p for p in (dmarc.get("domain", ""), policy, aligned) if p))
    arc = authentication.get("arc") or {}
    badge("ARC", arc, f"{arc.get('instances', 0)} set(s) {arc.get('domain', '')}".strip())
    return badges


@xframe_options_sameorigin
@member_required()
def email_html(request: HttpRequest, email_id: str) -> HttpResponse:
    """The sanitised HTML body as a document of its own, for the sandboxed frame."""
    email = _email_or_404(request, email_id)
    # ?measure=1: the hidden copy the email page measures the frame's height on. It keeps its
    # origin (so the page can read it) and may therefore fetch nothing: no remote images ever.
    measure = request.GET.get("measure") == "1"
    show_images = request.GET.get("images") == "1" and not measure
    inline: dict[str, str] = {}
    images = [
        attachment
        for attachment in email.attachments.all()
        if attachment.content_id and attachment.content_type.lower().startswith("image/")
    ]
    contents = selectors.attachment_contents(email.workspace, images)
    for attachment in images:
        uri = sanitize.inline_image_uri(contents[attachment.pk], attachment.content_type)
        if uri is not None:
            inline[attachment.content_id] = uri
    safe = sanitize.sanitize_html(email.html, remote_images=show_images, inline_images=inline)
    # The charset is declared here, not left to the document's <meta> (or to sniffing).
    response = HttpResponse(
        sanitize.email_document(
            safe.html, title=email.subject, stylesheet=static("css/mail-frame.css")
        ),
        content_type="text/html; charset=utf-8",
    )
    images_src = "img-src data: https: http:" if show_images else "img-src data:"
    sandbox = sanitize.MEASURE_SANDBOX if measure else sanitize.FRAME_SANDBOX
    # Our own policy (config.csp keeps a policy a response already has): nothing but images and
    # the frame's default stylesheet, framable by the dashboard only, sandboxed without scripts
    # even when opened on its own (docs/security.md, "The HTML frame").
    response["Content-Security-Policy"] = (
        f"default-src 'none'; {images_src}; style-src 'self'; base-uri 'none'; "
        f"form-action 'none'; frame-ancestors 'self'; sandbox {sandbox}"
    )
    response["Referrer-Policy"] = "no-referrer"
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, no-store"
    return response


@member_required()
def email_raw(request: HttpRequest, email_id: str) -> HttpResponse:
    """The message exactly as received, as plain text (``?download=1``: an .eml file)."""
    try:
        raw = selectors.email_raw(request.membership.workspace, email_id)  # type: ignore[attr-defined]
    except NotFound:
        raise Http404("No such email.") from None
    download = request.GET.get("download") == "1"
    response = HttpResponse(
        raw, content_type="message/rfc822" if download else "text/plain; charset=utf-8"
    )
    response["Content-Disposition"] = content_disposition_header(download, f"{email_id}.eml")
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response


@member_required()
def email_attachment(request: HttpRequest, email_id: str, attachment_id: str) -> HttpResponse:
    """An attachment as a download with a content type that cannot become a page of ours."""
    try:
        attachment = selectors.attachment_get(
            request.membership.workspace,  # type: ignore[attr-defined]
            email_id,
            attachment_id,
        )
    except NotFound:
        raise Http404("No such attachment.") from None
    declared = (attachment.content_type or "").split(";", 1)[0].strip().lower()
    content_type = declared if declared in SAFE_DOWNLOAD_TYPES else "application/octet-stream"
    content = selectors.attachment_content(
        request.membership.workspace,  # type: ignore[attr-defined]
        attachment,
    )
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = content_disposition_header(
        True, attachment.filename or f"{attachment.pk}.bin"
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response


@require_POST
@member_required()
def email_read(request: HttpRequest, email_id: str) -> HttpResponse:
    """Marks the email read or unread (``email_update(read=...)``, as PATCH /emails/{id})."""
    if not may(request, "write"):
        return refuse(request, "change emails")
    email = _email_or_404(request, email_id)
    form = EmailReadForm(request.POST)
    if form.is_valid():
        services.email_update(email=email, read=form.cleaned_data["read"])
        state = "read" if form.cleaned_data["read"] else "unread"
        messages.success(request, f"Marked “{email.subject or '(no subject)'}” {state}.")
    return redirect(_back(request, reverse("inbox_detail", args=[email.inbox_id])))


@require_POST
@member_required()
def email_delete(request: HttpRequest, email_id: str) -> HttpResponse:
    """Deletes the email (``email_delete``, as DELETE /emails/{id})."""
    if not may(request, "write"):
        return refuse(request, "delete emails")
    email = _email_or_404(request, email_id)
    services.email_delete(email=email)
    messages.success(request, f"Deleted “{email.subject or '(no subject)'}”.")
    inbox_page = reverse("inbox_detail", args=[email.inbox_id])
    back = _back(request, inbox_page)
    return redirect(inbox_page if back.startswith(f"/emails/{email.pk}") else back)


def _manual_keys(email: Email) -> list[str]:
    return [row.key for row in email.email_labels.all() if row.source == "manual"]


@require_POST
@member_required()
def email_label_add(request: HttpRequest, email_id: str) -> HttpResponse:
    """Adds a manual label: the manual labels become the current ones plus this key."""
    if not may(request, "write"):
        return refuse(request, "label emails")
    email = _email_or_404(request, email_id)
    _, addable = _label_rows(email)
    form = LabelAddForm(request.POST, choices=addable)
    if not form.is_valid():
        messages.error(request, "Choose a label that is not on this email yet.")
    else:
        key = form.cleaned_data["key"]
        try:
            services.email_update(email=email, labels=[*_manual_keys(email), key])
        except ApiError as error:
            messages.error(request, error.message)
        else:
            messages.success(request, f"Added the label {key}.")
    return redirect("email_detail", email_id=email.pk)


@require_POST
@member_required()
def email_label_remove(request: HttpRequest, email_id: str, key: str) -> HttpResponse:
    """Removes a label: a manual one by replacing the manual set, any other with
    ``remove_labels`` (a removed classifier label teaches the classifier)."""
    if not may(request, "write"):
        return refuse(request, "label emails")
    email = _email_or_404(request, email_id)
    manual = _manual_keys(email)
    on_email = {row.key for row in email.email_labels.all()}
    if key not in on_email:
        messages.error(request, f"The label {key} is not on this email.")
        return redirect("email_detail", email_id=email.pk)
    try:
        if key in manual:
            services.email_update(email=email, labels=[k for k in manual if k != key])
        else:
            services.email_update(email=email, remove_labels=[key])
    except ApiError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Removed the label {key}.")
    return redirect("email_detail", email_id=email.pk)


@require_POST
@member_required()
def email_label_example(request: HttpRequest, email_id: str, key: str) -> HttpResponse:
    """The "yes / no for this label" buttons: the same service as ``POST /labels/{key}/examples``
    (``answer`` yes or no), or ``DELETE /labels/{key}/examples/{id}`` (``answer`` forget)."""
    if not may(request, "write"):
        return refuse(request, "teach labels")
    email = _email_or_404(request, email_id)
    try:
        label = label_selectors.label_get(email.workspace, key)
    except NotFound:
        raise Http404("No such label.") from None
    answer = request.POST.get("answer")
    if answer in ("yes", "no"):
        label_services.example_add(
            label=label,
            email_id=email.pk,
            facts=facts_of(email),
            answer=answer == "yes",
            by=actor_of(request),
        )
        messages.success(request, f"Noted: {answer} for {label.name}.")
    elif answer == "forget":
        example = label_selectors.examples_of_email(email.workspace, email.pk).get(key)
        if example is not None:
            label_services.example_remove(example=example, by=actor_of(request))
        messages.success(request, f"Forgot this email as an example for {label.name}.")
    else:
        messages.error(request, "Answer yes or no.")
    return redirect("email_detail", email_id=email.pk)
