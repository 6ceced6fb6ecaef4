from django.apps import AppConfig


class MailConfig(AppConfig):
    name = "mail"

    def ready(self) -> None:
        from apikeys.services import on_workspace_delete
        from mail.services import workspace_mail_purge

        on_workspace_delete(workspace_mail_purge)
