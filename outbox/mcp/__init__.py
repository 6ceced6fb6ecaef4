"""The Model Context Protocol server: Pigeonhole's tools for AI agents (docs/agents.md).

It is an agent-facing surface like the REST API, built with the official ``mcp`` Python SDK, and
it lives in ``outbox`` because it calls every app including the outbox (``send_email``), and the
layers let only the top app do that (``pyproject.toml``'s import-linter contracts):

- ``auth``: the key, its scopes and rate limit, through the same functions as the raw ASGI
  endpoints, from one place;
- ``results``: the tools' structured outputs, and mail content marked as untrusted;
- ``tools``: the tools, each a thin call of an existing service or selector;
- ``server``: the SDK's server object with the tools registered;
- ``asgi``: ``/mcp`` (streamable HTTP, stateless), mounted by ``config.asgi``;
- ``views`` and ``clients``: the dashboard's "Connect an agent" page and its client snippets;
- ``outbox/management/commands/mcp.py``: stdio (``manage.py mcp --key pgh_…``).
"""
