"""``manage.py serve`` (what ``make run`` starts) on a port another process holds: it stops with
an exit status and a message that says what to do. Found walking the quick start (issue 25): a
busy HTTP port ended in daphne's CRITICAL log line with exit status 0, and a busy SMTP port in
the start-up banner over a receiver that never listened."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live import ROOT, free_port
from tests.quickstart import quickstart_env

pytestmark = pytest.mark.live


@pytest.mark.parametrize("busy", ["http", "smtp"])
def test_a_busy_port_stops_serve_with_what_to_do(busy: str, tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        http, smtp = (taken, free_port()) if busy == "http" else (free_port(), taken)
        env = quickstart_env()
        env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'pigeonhole.sqlite3'}"
        done = subprocess.run(
            [sys.executable, "manage.py", "serve", "--port", str(http), "--smtp-port", str(smtp)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert "Pigeonhole: http://" not in done.stdout  # no banner over a server that is not there
    flag, variable = ("--port", "PORT") if busy == "http" else ("--smtp-port", "SMTP_PORT")
    assert f"127.0.0.1:{taken} is in use" in done.stderr, done.stderr
    assert f"{flag} {taken + 1}" in done.stderr and f"make run {variable}={taken + 1}" in (
        done.stderr
    )


def test_ctrl_c_stops_serve_even_when_started_with_sigint_ignored(tmp_path: Path) -> None:
    """A script's `&` or a CI runner starts a process with SIGINT ignored; Twisted then left
    SIGINT alone and the server could not be stopped with Ctrl-C (test_server_wheel failed under
    such a runner). serve puts Python's handler back before it runs."""
    import signal
    import time

    from tests.live import wait_listening

    http, smtp = free_port(), free_port()
    env = quickstart_env()
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'pigeonhole.sqlite3'}"
    argv = [sys.executable, "manage.py", "serve", "--migrate", "--port", str(http)]
    proc = subprocess.Popen(
        [*argv, "--smtp-port", str(smtp)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        wait_listening(proc, smtp, timeout=120)  # SMTP listens once the web server runs
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
