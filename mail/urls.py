"""The emails API's Django routes. ``GET /emails/wait`` is served by Channels
(``mail.realtime.emails_wait_app``, routed in ``config.asgi`` before Django): the email id
converter leaves ``wait`` out, so Django never takes it for an email id."""

from django.urls import path, register_converter

from mail import api


class EmailIdConverter:
    """Any path segment but ``wait`` (the workspace-wide wait's path)."""

    regex = r"(?!wait/?$)[^/]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(EmailIdConverter, "email_id")

urlpatterns = [
    path("inboxes/<str:inbox_id>/emails", api.InboxEmailsApi.as_view()),
    path("inboxes/<str:inbox_id>/export", api.InboxExportApi.as_view()),
    path("emails", api.EmailsApi.as_view()),
    path("emails/<email_id:email_id>", api.EmailApi.as_view()),
    path("emails/<str:email_id>/raw", api.EmailRawApi.as_view()),
    path("emails/<str:email_id>/attachments/<str:attachment_id>", api.EmailAttachmentApi.as_view()),
]
