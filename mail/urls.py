from django.urls import path

from mail import api

urlpatterns = [
    path("inboxes/<str:inbox_id>/emails", api.InboxEmailsApi.as_view()),
    path("inboxes/<str:inbox_id>/export", api.InboxExportApi.as_view()),
    path("emails", api.EmailsApi.as_view()),
    path("emails/<str:email_id>", api.EmailApi.as_view()),
    path("emails/<str:email_id>/raw", api.EmailRawApi.as_view()),
    path("emails/<str:email_id>/attachments/<str:attachment_id>", api.EmailAttachmentApi.as_view()),
]
