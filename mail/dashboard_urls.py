"""Dashboard pages of the mail app."""

urlpatterns: list = []
