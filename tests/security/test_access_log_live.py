"""The web process's output never shows a key given in a URL, at any verbosity: daphne's access
log is redacted (config.web), and Twisted's own per-request log line, which daphne sends to the
output at ``-v 2``, is not written at all (it printed ``?access_token=pgh_…`` whole)."""

from __future__ import annotations

import collections
import signal
import subprocess
import sys
import time

import httpx
import pytest

from tests.live import ROOT, _wait_port, child_env, drain, free_port

KEY = "pgh_" + "Q" * 40  # well-formed, unknown: the stream answers 401 at once


@pytest.mark.parametrize("verbosity", ["1", "2"])
def test_a_key_in_the_url_is_in_no_line_of_the_output(
    transactional_db: None, verbosity: str
) -> None:
    from django.db import connection

    port = free_port()
    argv = [sys.executable, "-m", "config.web", "-v", verbosity, "-b", "127.0.0.1"]
    proc = subprocess.Popen(
        [*argv, "-p", str(port), "config.asgi:application"],
        cwd=ROOT,
        env=child_env(connection.settings_dict["NAME"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # the access log (stdout) and the log (stderr) alike
    )
    output: collections.deque[str] = collections.deque(maxlen=2000)
    assert proc.stdout is not None
    reader = drain(proc.stdout, output)
    try:
        _wait_port(port, proc)
        url = f"http://127.0.0.1:{port}/api/v1/inboxes/x/stream?access_token={KEY}"
        assert httpx.get(url, timeout=30).status_code == 401
        deadline = time.monotonic() + 10
        while not any("stream?access_token=[redacted]" in line for line in output):
            assert time.monotonic() < deadline, "no access log line:\n" + "\n".join(output)
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        reader.join(10)
    assert [line for line in output if KEY in line] == []
