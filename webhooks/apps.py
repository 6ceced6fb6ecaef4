from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"

    def ready(self) -> None:
        from events.services import on_record
        from webhooks.services import fan_out

        on_record(fan_out)  # deliveries commit with their events, or not at all
