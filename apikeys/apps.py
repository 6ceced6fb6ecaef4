from django.apps import AppConfig


class ApikeysConfig(AppConfig):
    name = "apikeys"
    verbose_name = "Workspaces and API keys"

    def ready(self) -> None:
        from apikeys import schema  # noqa: F401  (registers the OpenAPI auth extensions)
