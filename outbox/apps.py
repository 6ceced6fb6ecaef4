from django.apps import AppConfig


class OutboxConfig(AppConfig):
    name = "outbox"

    def ready(self) -> None:
        from events.services import on_record
        from outbox.services import forward_received, forward_received_idle_if

        on_record(  # the forward_to copy of received mail
            forward_received, emits=True, idle_if=forward_received_idle_if
        )
