"""Errors of the outbox app."""

from config.api.errors import ApiError, NotFound


class OutboxNotFound(NotFound):
    message = "No such outbox item."


class InvalidState(ApiError):
    code, status, message = "invalid_state", 409, "The item is not pending."
