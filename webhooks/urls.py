from django.urls import path

from webhooks import api

urlpatterns = [
    path("webhooks", api.EndpointsApi.as_view()),
    path("webhooks/<str:endpoint_id>", api.EndpointApi.as_view()),
    path("webhooks/<str:endpoint_id>/deliveries", api.DeliveriesApi.as_view()),
    path(
        "webhooks/<str:endpoint_id>/deliveries/<str:delivery_id>/replay",
        api.ReplayApi.as_view(),
    ),
    path("webhooks/<str:endpoint_id>/test", api.TestApi.as_view()),
]
