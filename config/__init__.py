"""Pigeonhole configuration: settings, URLs, the ASGI entry point, the Celery app, the API kit."""

from config.celery import app as celery_app

__all__ = ["celery_app"]
