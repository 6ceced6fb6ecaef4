from django.urls import path

from inboxes import api

urlpatterns = [
    path("domains", api.DomainsApi.as_view()),
]
