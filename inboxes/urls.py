from django.urls import path

from inboxes import api

urlpatterns = [
    path("domains", api.DomainsApi.as_view()),
    path("domains/<str:domain>/verify", api.DomainVerifyApi.as_view()),
    path("inboxes", api.InboxesApi.as_view()),
    path("inboxes/<str:inbox_id>", api.InboxApi.as_view()),
    path("inboxes/<str:inbox_id>/smtp-credentials", api.SmtpCredentialsApi.as_view()),
    path(
        "inboxes/<str:inbox_id>/smtp-credentials/<str:credential_id>",
        api.SmtpCredentialApi.as_view(),
    ),
]
