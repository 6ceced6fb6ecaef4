from django.apps import AppConfig


class OutboxConfig(AppConfig):
    name = "outbox"

    def ready(self) -> None:
        from events.services import on_record
        from outbox.services import forward_received

        on_record(forward_received, emits=True)  # the forward_to copy of received mail
