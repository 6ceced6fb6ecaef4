from django.apps import AppConfig


class InboxesConfig(AppConfig):
    name = "inboxes"
