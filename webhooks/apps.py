from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"

    def ready(self) -> None:
        from apikeys.services import on_workspace_delete
        from events.services import on_record
        from webhooks.services import fan_out, workspace_deliveries_purge

        on_record(fan_out)  # deliveries commit with their events, or not at all
        on_workspace_delete(workspace_deliveries_purge)
