"""Errors of the labels app."""

from config.api.errors import ApiError


class UnknownLabel(ApiError):
    code, status, message = "unknown_label", 400, "No label with that key."


class LabelExists(ApiError):
    code, status, message = "label_exists", 409, "A label with that key exists."
