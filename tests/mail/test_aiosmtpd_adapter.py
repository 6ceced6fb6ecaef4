"""The internals of aiosmtpd (and of asyncio's streams) that ``mail.smtpd.aiosmtpd_adapter`` relies
on: each check fails naming the library, its version and what moved, so that an upgrade is read
against the adapter before it ships (the pins in pyproject.toml move with it)."""

from __future__ import annotations

import asyncio
import inspect
import sys
from importlib.metadata import version

import aiosmtpd.smtp
from aiosmtpd.smtp import SMTP, _AuthMechAttr

from mail.smtpd.aiosmtpd_adapter import AdaptedSMTP, SessionTemplate

AIOSMTPD = f"aiosmtpd {version('aiosmtpd')}"
PYTHON = f"Python {sys.version.split()[0]}"

# What aiosmtpd 1.4's ``SMTP.__init__`` leaves on an instance beside asyncio's own protocol
# state: the first session's copy of these is every later session's, so each is either the
# same for every session of a handler, or per-session and None until a connection is made.
PER_SESSION = {
    "session",
    "envelope",
    "transport",
    "_handler_coroutine",
    "_timeout_handle",
    "_tls_protocol",
    "_original_transport",
}
PER_HANDLER = {
    "__ident__",
    "loop",
    "event_handler",
    "data_size_limit",
    "enable_SMTPUTF8",
    "hostname",
    "tls_context",
    "require_starttls",
    "_decode_data",
    "_timeout_duration",
    "_tls_handshake_okay",
    "_auth_require_tls",
    "_proxy_timeout",
    "_authenticator",
    "_auth_callback",
    "_auth_required",
    "_auth_methods",
    "_handle_hooks",
    "_ehlo_hook_ver",
    "_smtp_methods",
    "_enforce_call_limit",
}


class _Hooks:
    async def handle_DATA(self, server: SMTP, session: object, envelope: object) -> str:
        return "250 OK"


def test_aiosmtpd_is_the_version_the_adapter_was_written_against() -> None:
    """A new version needs the checks below read again, and the pin in pyproject.toml moved."""
    assert version("aiosmtpd").startswith("1.4."), (
        f"{AIOSMTPD}: mail/smtpd/aiosmtpd_adapter.py was written against aiosmtpd 1.4"
    )


def test_smtp_init_leaves_only_state_a_template_may_share() -> None:
    async def run() -> None:
        server = SMTP(_Hooks())
        protocol = asyncio.StreamReaderProtocol(asyncio.StreamReader(), lambda r, w: None)
        own = set(server.__dict__) - set(protocol.__dict__)
        new, gone = own - PER_SESSION - PER_HANDLER, (PER_SESSION | PER_HANDLER) - own
        assert not new, f"{AIOSMTPD}: SMTP.__init__ sets {sorted(new)}: per session or not?"
        assert not gone, f"{AIOSMTPD}: SMTP.__init__ no longer sets {sorted(gone)}"
        for name in PER_SESSION:
            value = getattr(server, name)
            assert value is None, f"{AIOSMTPD}: SMTP.{name} is {value!r} before a connection"

    asyncio.run(run())


def test_the_command_and_auth_tables_are_what_the_adapter_rebinds() -> None:
    async def run() -> None:
        server = SMTP(_Hooks())
        methods = server._smtp_methods
        assert isinstance(methods, dict), f"{AIOSMTPD}: SMTP._smtp_methods is not a dict"
        for name, method in methods.items():
            assert method == getattr(server, f"smtp_{name}"), (
                f"{AIOSMTPD}: SMTP._smtp_methods[{name!r}] is not the bound smtp_{name}"
            )
        assert "DATA" in methods, f"{AIOSMTPD}: SMTP._smtp_methods has no DATA"
        assert _AuthMechAttr._fields == ("method", "is_builtin"), (
            f"{AIOSMTPD}: aiosmtpd.smtp._AuthMechAttr is now {_AuthMechAttr._fields}"
        )
        auth = server._auth_methods
        assert auth and all(isinstance(a, _AuthMechAttr) for a in auth.values()), (
            f"{AIOSMTPD}: SMTP._auth_methods no longer maps mechanisms to _AuthMechAttr"
        )
        for mechanism, entry in auth.items():
            if entry.is_builtin:
                assert entry.method == getattr(server, entry.method.__name__), (
                    f"{AIOSMTPD}: the builtin AUTH {mechanism} is not a method of the server"
                )

    asyncio.run(run())


def test_the_stream_hand_over_and_the_private_hooks_are_there() -> None:
    stream_protocol = inspect.signature(asyncio.StreamReaderProtocol.__init__).parameters
    assert list(stream_protocol)[:4] == ["self", "stream_reader", "client_connected_cb", "loop"], (
        f"{PYTHON}: asyncio.StreamReaderProtocol.__init__ is now {list(stream_protocol)}"
    )
    connected = inspect.getsource(SMTP._cb_client_connected)
    assert "self._reader = reader" in connected, (
        f"{AIOSMTPD}: SMTP._cb_client_connected no longer keeps the stream as _reader"
    )
    # Command lines come through readuntil (the adapter's caller remembers the raw line there).
    assert "await self._reader.readuntil()" in inspect.getsource(SMTP._handle_client), (
        f"{AIOSMTPD}: SMTP._handle_client no longer reads commands with _reader.readuntil()"
    )
    for name, parameters in (
        ("_reset_timeout", ["self", "duration"]),
        ("_call_handler_hook", ["self", "command", "args"]),
        ("_set_post_data_state", ["self"]),
        ("_getaddr", ["self", "arg"]),
    ):
        method = getattr(SMTP, name, None)
        assert callable(method), f"{AIOSMTPD}: SMTP.{name} is gone"
        found = list(inspect.signature(method).parameters)
        assert found == parameters, f"{AIOSMTPD}: SMTP.{name} takes {found}, not {parameters}"
    assert inspect.iscoroutinefunction(SMTP._call_handler_hook), (
        f"{AIOSMTPD}: SMTP._call_handler_hook is no longer a coroutine function"
    )
    assert "self.envelope = self._create_envelope()" in inspect.getsource(
        SMTP._set_post_data_state
    ), f"{AIOSMTPD}: SMTP._set_post_data_state no longer starts a new envelope"
    assert aiosmtpd.smtp.MISSING is not None


def test_bytes_pushed_back_are_read_first() -> None:
    """asyncio's ``StreamReader._buffer``: what the adapter puts at its front is what the next
    ``readuntil`` returns, before what had arrived after it."""

    async def run() -> None:
        reader = asyncio.StreamReader()
        assert isinstance(getattr(reader, "_buffer", None), bytearray), (
            f"{PYTHON}: asyncio.StreamReader._buffer is no longer a bytearray"
        )
        reader.feed_data(b"QUIT\r\n")
        server = AdaptedSMTP(_Hooks(), template=SessionTemplate(), reader=lambda loop: reader)
        server._cb_client_connected(reader, None)  # what asyncio does on connection_made
        assert server.reader is reader
        server.push_back(b"RSET\r\n")
        assert await reader.readuntil() == b"RSET\r\n", f"{PYTHON}: pushed-back bytes not first"
        assert await reader.readuntil() == b"QUIT\r\n"

    asyncio.run(run())


def test_sessions_of_a_template_get_the_callers_stream_and_their_own_methods() -> None:
    async def run() -> None:
        template = SessionTemplate()
        streams = [asyncio.StreamReader() for _ in range(2)]
        first, second = (
            AdaptedSMTP(_Hooks(), template=template, reader=lambda loop, s=s: s) for s in streams
        )
        assert template.state is not None
        for server, stream in ((first, streams[0]), (second, streams[1])):
            assert server._stream_reader is stream, f"{PYTHON}: the caller's stream is not used"
            assert server._smtp_methods["DATA"].__self__ is server
        assert second.parse_path("<a@example.com> SIZE=1") == ("a@example.com", "SIZE=1")
        assert second._getaddr("<a@example.com>") == ("a@example.com", "")

    asyncio.run(run())


def test_starttls_keeps_the_plain_transport_and_connects_again() -> None:
    """``AdaptedSMTP.tls_started``: STARTTLS sets ``_original_transport`` before the handshake,
    and ``connection_made`` is called again with the TLS transport (the per-IP count of
    ``mail.smtpd.server`` must not count that call)."""
    starttls = inspect.getsource(SMTP.smtp_STARTTLS)
    assert "self._original_transport = self.transport" in starttls, (
        f"{AIOSMTPD}: STARTTLS no longer keeps the plain transport as _original_transport"
    )
    made = inspect.getsource(SMTP.connection_made)
    assert "seen_starttls = (self._original_transport is not None)" in made, (
        f"{AIOSMTPD}: connection_made no longer tells a STARTTLS hand-over by _original_transport"
    )
    assert "class TLSSetupException" in inspect.getsource(aiosmtpd.smtp), (
        f"{AIOSMTPD}: a failed STARTTLS handshake is no longer a TLSSetupException"
    )
    assert AdaptedSMTP.tls_started.fget is not None
