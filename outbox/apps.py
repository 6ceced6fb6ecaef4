from django.apps import AppConfig


class OutboxConfig(AppConfig):
    name = "outbox"

    def ready(self) -> None:
        from outbox import services  # noqa: F401  (registers the forward_to hook on events)
