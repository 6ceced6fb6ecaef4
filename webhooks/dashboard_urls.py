"""Dashboard pages of the webhooks app."""

urlpatterns: list = []
