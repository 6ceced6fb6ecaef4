from django.apps import AppConfig


class OutboxConfig(AppConfig):
    name = "outbox"
