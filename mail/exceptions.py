"""Errors of the mail app."""

from config.api.errors import NotFound


class EmailNotFound(NotFound):
    message = "No such email."


class AttachmentNotFound(NotFound):
    message = "No such attachment."
