from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"

    def ready(self) -> None:
        from apikeys.services import on_workspace_delete
        from events.services import on_record
        from webhooks.services import fan_out, fan_out_idle_if, workspace_deliveries_purge

        on_record(fan_out, idle_if=fan_out_idle_if)  # deliveries commit with their events, or none
        on_workspace_delete(workspace_deliveries_purge)
