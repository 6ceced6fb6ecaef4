"""Errors of the tenancy and access app."""

from config.api.errors import Conflict, Forbidden, Unauthorized


class InvalidKey(Unauthorized):
    message = "The API key is not valid."


class KeyRevoked(Unauthorized):
    message = "The API key has been revoked."


class KeyExpired(Unauthorized):
    message = "The API key has expired."


class LastOwner(Conflict):
    code = "last_owner"
    message = "A workspace always keeps at least one owner: make someone else an owner first."


class AlreadyMember(Conflict):
    code = "already_member"
    message = "That person is already a member of this workspace."


class RoleNotAllowed(Forbidden):
    message = "Only owners can make someone an owner or change or remove an owner."
