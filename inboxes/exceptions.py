"""Errors of the inboxes app."""

from config.api.errors import ApiError, InsufficientScope


class NoDomain(ApiError):
    code, status, message = "no_domain", 409, "No domain is available for new inboxes."


class InvalidDomain(ApiError):
    code, status, message = "invalid_domain", 400, "This workspace may not use that domain."


class AddressTaken(ApiError):
    code, status, message = "address_taken", 409, "That address is already taken."


class DomainInUse(ApiError):
    code, status, message = "domain_in_use", 409, "Inboxes still use this domain."


class ForwardNeedsSend(InsufficientScope):
    """Forwarding outside the workspace's domains sends mail out: it takes the ``send`` scope."""

    def __init__(self, address: str) -> None:
        super().__init__("send")
        message = (
            f"Forwarding to {address}, outside this workspace's domains, sends mail out: it "
            "requires the 'send' scope."
        )
        self.message = message
        self.args = (message,)
        self.issues = [{"path": "forward_to", "message": message}]
