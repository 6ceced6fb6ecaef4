"""Errors of the tenancy and access app."""

from config.api.errors import Unauthorized


class InvalidKey(Unauthorized):
    message = "The API key is not valid."


class KeyRevoked(Unauthorized):
    message = "The API key has been revoked."


class KeyExpired(Unauthorized):
    message = "The API key has expired."
