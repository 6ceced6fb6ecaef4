"""Errors of the inboxes app."""

from config.api.errors import ApiError


class NoDomain(ApiError):
    code, status, message = "no_domain", 409, "No domain is available for new inboxes."


class InvalidDomain(ApiError):
    code, status, message = "invalid_domain", 400, "This workspace may not use that domain."


class AddressTaken(ApiError):
    code, status, message = "address_taken", 409, "That address is already taken."


class DomainInUse(ApiError):
    code, status, message = "domain_in_use", 409, "Inboxes still use this domain."
