"""Dashboard pages of the inboxes app."""

urlpatterns: list = []
