"""Security matrices (issue 11): tenancy, authorization, mass assignment, secrets and more."""
