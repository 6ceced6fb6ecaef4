from django.urls import path

from apikeys import api

urlpatterns = [
    path("keys", api.KeysApi.as_view()),
    path("keys/<str:key_id>", api.KeyApi.as_view()),
    path("me", api.MeApi.as_view()),
]
