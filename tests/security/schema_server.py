"""Daphne for the schema fuzzer, with a network guard: nothing leaves 127.0.0.1.

The fuzzer creates webhooks to generated URLs, sends mail to generated addresses and asks for
test deliveries, and the web process runs those tasks in-process (``CELERY_TASK_ALWAYS_EAGER``).
Before daphne starts, this module replaces ``socket.getaddrinfo`` so that only ``localhost`` and
IP literals resolve (any other name fails as an unknown host: no DNS query leaves the machine),
and ``socket.socket.connect`` so that only loopback and Unix-socket peers can be reached (any
other address is refused as ``ConnectionRefusedError``). The product's code runs unchanged; it
simply meets a network in which every outside host is unreachable. Each refusal is counted in
``GUARD_LOG`` (one line per refused connect), so the test can report that none got through.

Run as ``python -m tests.security.schema_server <daphne arguments>`` (the web process as the
Procfile starts it, ``config.web``), or in embedded mode as
``python -m tests.security.schema_server serve <manage.py serve arguments>``.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from typing import Any

_real_getaddrinfo = socket.getaddrinfo
_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def _literal(host: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return None
    try:
        return ipaddress.ip_address(host.split("%")[0].strip("[]"))
    except ValueError:
        return None


def guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    """Resolves IP literals and localhost only; every other name is an unknown host."""
    if host is None or _literal(host) is not None:
        return _real_getaddrinfo(host, *args, **kwargs)
    name = host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)
    if name.lower().rstrip(".") in _LOCAL_NAMES:
        return _real_getaddrinfo("127.0.0.1", *args, **kwargs)
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known (fuzz guard)")


def _allowed(sock: socket.socket, address: Any) -> bool:
    if sock.family == getattr(socket, "AF_UNIX", None):
        return True
    host = address[0] if isinstance(address, tuple) and address else None
    ip = _literal(host)
    if ip is None:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def _refuse(address: Any) -> None:
    log = os.environ.get("GUARD_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"{address!r}\n")


def guarded_connect(sock: socket.socket, address: Any) -> None:
    if not _allowed(sock, address):
        _refuse(address)
        raise ConnectionRefusedError(111, f"Connection to {address!r} refused (fuzz guard)")
    _real_connect(sock, address)


def guarded_connect_ex(sock: socket.socket, address: Any) -> int:
    if not _allowed(sock, address):
        _refuse(address)
        return 111
    return _real_connect_ex(sock, address)


def install() -> None:
    socket.getaddrinfo = guarded_getaddrinfo
    socket.socket.connect = guarded_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = guarded_connect_ex  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    if sys.argv[1:2] == ["serve"]:  # embedded mode: `manage.py serve <arguments>`, guarded
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        from django.core.management import execute_from_command_line

        execute_from_command_line(["manage.py", *sys.argv[1:]])
    else:  # the Procfile's web process: daphne through config.web (its request and channel)
        from config.web import WebCommandLine

        sys.argv[0] = "daphne"
        WebCommandLine.entrypoint()
