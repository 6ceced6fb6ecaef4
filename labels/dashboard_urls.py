"""Dashboard pages of the labels app."""

urlpatterns: list = []
