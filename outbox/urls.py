from django.urls import path

from outbox import api

urlpatterns = [
    path("inboxes/<str:inbox_id>/send", api.SendApi.as_view()),
    path("outbox", api.OutboxApi.as_view()),
    path("outbox/<str:item_id>", api.OutboxItemApi.as_view()),
    path("outbox/<str:item_id>/decision", api.DecisionApi.as_view()),
    path("stats", api.StatsApi.as_view()),
]
