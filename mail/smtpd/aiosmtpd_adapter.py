"""aiosmtpd's private internals, used here and nowhere else (house style, idiom 10).

The SMTP front door (``mail.smtp``) builds its server on :class:`AdaptedSMTP`, aiosmtpd's
``SMTP`` with the private parts it needs reached through names of ours:

- **sessions set up from a template**: aiosmtpd's ``SMTP.__init__`` walks the instance and the
  handler with ``inspect.getmembers`` and ``dir`` for every connection; the first session of a
  :class:`SessionTemplate` runs it, later ones copy its ``__dict__`` and bind its
  ``_smtp_methods`` and ``_auth_methods`` (``_AuthMechAttr``) to themselves;
- **a stream of the caller's**: ``SMTP.__init__`` makes its own ``StreamReader``, which aiosmtpd
  hands to itself in ``_cb_client_connected`` (as ``_reader``);
- **DATA read by the caller** (aiosmtpd's reads the whole message before any limit applies):
  the stream, the idle timer (``_reset_timeout``), the handler hook (``_call_handler_hook``),
  the envelope reset after DATA (``_set_post_data_state``), and bytes read past the end of data
  given back to the front of the stream's buffer (asyncio's ``StreamReader._buffer``), where
  aiosmtpd reads the pipelined commands that follow;
- **the MAIL and RCPT path parser** (``_getaddr``) as :meth:`AdaptedSMTP.parse_path`;
- **STARTTLS under way**: aiosmtpd's STARTTLS keeps the plain transport (``_original_transport``)
  and calls ``connection_made`` a second time with the TLS transport; :attr:`AdaptedSMTP.
  tls_started` tells that second call from a new connection, and :meth:`AdaptedSMTP.release_tls`
  lets go of both once the connection is lost.

It was written against aiosmtpd 1.4 (the pin in ``pyproject.toml``) and CPython 3.11's asyncio;
``tests/mail/test_aiosmtpd_adapter.py`` checks every internal named above and fails naming the
library, its version and what moved.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiosmtpd.smtp import SMTP, _AuthMechAttr


class SessionTemplate:
    """The state aiosmtpd's ``__init__`` leaves on a handler's first session; it is the same for
    every session of that handler (one per server: keep it beside the handler)."""

    def __init__(self) -> None:
        self.state: dict[str, Any] | None = None


class AdaptedSMTP(SMTP):
    """aiosmtpd's server, set up from ``template`` and reading from the stream ``reader`` makes
    (given the session's event loop), with its private hooks under public names."""

    def __init__(
        self,
        handler: Any,
        *,
        template: SessionTemplate,
        reader: Callable[[asyncio.AbstractEventLoop], asyncio.StreamReader],
        **kwargs: Any,
    ) -> None:
        if template.state is None:
            super().__init__(handler, **kwargs)
            template.state = dict(self.__dict__)
        else:
            self._from_template(template.state)
        asyncio.StreamReaderProtocol.__init__(
            self, reader(self.loop), client_connected_cb=self._cb_client_connected, loop=self.loop
        )

    def _from_template(self, template: dict[str, Any]) -> None:
        """A new session from the first one's state. Per-session state is fresh there (``None``
        before a connection; the stream is set up by ``__init__``); the command and AUTH methods
        are bound to this session."""
        self.__dict__.update(template)
        self._smtp_methods = {
            name: getattr(self, f"smtp_{name}") for name in template["_smtp_methods"]
        }
        self._auth_methods = {
            mechanism: _AuthMechAttr(
                getattr(self, auth.method.__name__) if auth.is_builtin else auth.method,
                auth.is_builtin,
            )
            for mechanism, auth in template["_auth_methods"].items()
        }

    # -- the MAIL and RCPT path parser ---------------------------------------------------------

    def _getaddr(self, arg: str) -> tuple[str | None, str | None]:
        return self.parse_path(arg)

    def parse_path(self, arg: str) -> tuple[str | None, str | None]:
        """``(address, the rest)`` of a MAIL or RCPT argument, ``(None, None)`` if malformed:
        aiosmtpd's parser, for subclasses to override."""
        return super()._getaddr(arg)

    # -- STARTTLS ------------------------------------------------------------------------------

    def release_tls(self) -> None:
        """Drops the session's TLS objects once the connection is gone. A session is a cycle
        (its command table holds methods bound to it); after STARTTLS it lives long enough to
        reach the collector's oldest generation, which is rarely collected, and it kept its TLS
        connection's OpenSSL buffers until then: a busy receiver's memory grew with every
        STARTTLS session (figures in the commit that added this)."""
        self._tls_protocol = None
        self._original_transport = None

    @property
    def tls_started(self) -> bool:
        """The session issued STARTTLS (``connection_made`` is then called again, with the TLS
        transport, for the same connection)."""
        return self._original_transport is not None

    # -- what a DATA command of its own needs --------------------------------------------------

    @property
    def reader(self) -> asyncio.StreamReader:
        """The session's stream (the one ``reader`` made)."""
        return self._reader

    def push_back(self, data: bytes) -> None:
        """Puts ``data`` (read past the end of DATA) back at the front of the stream, where the
        command loop reads next."""
        self._reader._buffer[:0] = data  # type: ignore[attr-defined]

    def restart_idle_timer(self) -> None:
        """The session counts as active now (aiosmtpd's idle timeout starts again)."""
        self._reset_timeout()

    async def call_hook(self, command: str, *args: Any) -> Any:
        """The handler's ``handle_<command>`` as aiosmtpd calls it (``MISSING`` if it has none)."""
        return await self._call_handler_hook(command, *args)

    def new_envelope(self) -> None:
        """The state after DATA: a fresh envelope for the next message."""
        self._set_post_data_state()
