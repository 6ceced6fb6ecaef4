"""Errors of the tenancy and access app."""

from config.api.errors import ApiError, Conflict, Forbidden, Unauthorized


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


class AlreadyInvited(Conflict):
    code = "already_invited"
    message = "An invitation to that address is already waiting: revoke it first to send a new one."


class InvitationNotValid(ApiError):
    """The link names no invitation that can still be accepted; the message says why."""

    code = "invitation_invalid"
    status = 410
    message = "This invitation link is not valid. Ask the person who invited you for a new one."


class InvitationWrongAccount(Forbidden):
    message = "This invitation is for another e-mail address than the account you signed in with."


class AccountExists(Conflict):
    code = "account_exists"
    message = (
        "An account with this e-mail address exists already: sign in with it to accept the "
        "invitation."
    )
