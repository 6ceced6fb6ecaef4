"""Tenancy and access: workspaces, memberships, API keys, authentication, scopes, rate limits."""
