"""Dashboard pages of the outbox app."""

urlpatterns: list = []
