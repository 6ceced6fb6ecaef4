"""Errors of the webhooks app."""

from config.api.errors import ApiError, NotFound


class EndpointNotFound(NotFound):
    message = "No such webhook endpoint."


class DeliveryNotFound(NotFound):
    message = "No such delivery."


class UnknownLabelKey(ApiError):
    """Same code as labels' own: a filter names a label the workspace does not have."""

    code, status, message = "unknown_label", 400, "No label with that key."
