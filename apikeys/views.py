"""Dashboard pages of the tenancy app: the signed-in landing page."""

from __future__ import annotations

from django.apps import apps
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from apikeys import selectors
from apikeys.authentication import SESSION_WORKSPACE_KEY


@login_required
def home(request: HttpRequest) -> HttpResponse:
    membership = selectors.membership_for(request.user, request.session.get(SESSION_WORKSPACE_KEY))
    pending = 0
    if membership is not None:
        OutboxItem = apps.get_model("outbox", "OutboxItem")  # by string: apikeys imports no app
        pending = OutboxItem.objects.filter(
            workspace=membership.workspace, status="pending"
        ).count()
    return render(request, "home.html", {"membership": membership, "pending": pending})
