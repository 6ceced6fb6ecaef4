from django.urls import path

from inboxes import api

urlpatterns = [
    path("domains", api.DomainsApi.as_view()),
    path("domains/<str:domain>/verify", api.DomainVerifyApi.as_view()),
    path("inboxes", api.InboxesApi.as_view()),
    path("inboxes/<str:inbox_id>", api.InboxApi.as_view()),
]
