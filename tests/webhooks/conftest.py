"""Fixtures of the webhook tests."""

from tests.webhooks.receiver import receiver  # noqa: F401  (a fixture)
