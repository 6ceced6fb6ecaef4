from django.urls import path

from labels import api

urlpatterns = [
    path("labels", api.LabelsApi.as_view()),
    path("labels/test", api.LabelTestApi.as_view()),
    path("labels/<str:key>", api.LabelApi.as_view()),
    path("labels/<str:key>/examples", api.LabelExamplesApi.as_view()),
    path("labels/<str:key>/examples/<str:example_id>", api.LabelExampleApi.as_view()),
]
