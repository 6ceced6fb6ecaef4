"""Start-up (issue 32, point 5): a restarted ``smtpd`` and the embedded server start in about a
second because they leave out what they never use before their first request, and the smtpd
opens its port while its writer process starts. The start-up benchmark
(``tests/benchmarks/startup.py``) times it; these tests keep it: a module made lazy that comes
back at import time fails here, whatever the machine's speed, and so does an smtpd that a stop
signal, sent to its process group while its writer is still starting, ends with a traceback.

Each process runs as it does in production (``manage.py`` as ``__main__``, the real command),
with one addition: a thread that waits for the SMTP greeting, writes the names in ``sys.modules``
to a file and sends the process SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from tests.live import ROOT, free_port
from tests.quickstart import quickstart_env

pytestmark = pytest.mark.live

_WATCHED = r"""
import gc, json, os, runpy, signal, socket, sys, threading, time

out, port, *argv = sys.argv[1:]


def watch():
    while True:
        try:
            with socket.create_connection(("127.0.0.1", int(port)), timeout=2) as sock:
                sock.settimeout(10)
                if sock.recv(3) == b"220":
                    break
        except OSError:
            time.sleep(0.05)
    with open(out, "w") as f:
        json.dump({"modules": sorted(sys.modules.copy()), "gc": gc.get_threshold()}, f)
    os.kill(os.getpid(), signal.SIGTERM)


threading.Thread(target=watch, daemon=True).start()
sys.argv = argv
runpy.run_path(argv[0], run_name="__main__")
"""

# Never used by the process before its first request (or never at all): the OpenAPI generator
# (with the URLconf, loaded by Django's system checks; drf-spectacular's app and the extensions
# of the API's authentication are light and stay), the classifier's libraries, the MCP SDK and
# pydantic, the SES backend and boto, the webhooks' HTTP client (and the command-line tool's
# libraries it loads), and in the smtpd the web server.
_NEVER_BEFORE_SERVING = {
    "drf_spectacular.views",
    "drf_spectacular.generators",
    "drf_spectacular.openapi",
    "sklearn",
    "numpy",
    "scipy",
    "mcp",
    "pydantic",
    "boto3",
    "botocore",
    "django_ses",
    "httpx",
    "rich",
}
# CPython's (3.11, 3.12), which the processes run with once they have started.
_DEFAULT_THRESHOLDS = (700, 10, 10)
# The smtpd renders no API response: DRF's serializers (and requests and Pygments, which they
# load) are the web's, and so is dnspython (a custom domain's check).
_NOT_IN_SMTPD = _NEVER_BEFORE_SERVING | {
    "daphne",
    "twisted",
    "channels.auth",
    "config.urls",
    "rest_framework.response",
    "rest_framework.serializers",
    "requests",
    "pygments",
    "dns",
}


def _when_serving(argv: list[str], smtp_port: int, env: dict[str, str], tmp: Path) -> dict:
    """The process's modules and collector thresholds once it greets on ``smtp_port``."""
    out = tmp / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", _WATCHED, str(out), str(smtp_port), "manage.py", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.exists(), (done.returncode, done.stdout, done.stderr[-3000:])
    return json.loads(out.read_text())


def _loaded(modules: set, names: set) -> list[str]:
    """The modules of ``modules`` that are one of ``names`` or inside one."""
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_smtpd_imports_nothing_it_does_not_use(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    seen = _when_serving(["smtpd", "--host", "127.0.0.1", "--port", str(port)], port, env, tmp_path)
    modules = set(seen["modules"])
    assert "mail.smtpd.server" in modules  # the watcher saw the real command serve
    assert _loaded(modules, _NOT_IN_SMTPD) == [], _loaded(modules, _NOT_IN_SMTPD)
    # The collector ran rarely while it started (config/startup.py), as usual once it serves.
    assert tuple(seen["gc"]) == _DEFAULT_THRESHOLDS


def test_embedded_server_imports_nothing_it_does_not_use_before_serving(tmp_path: Path) -> None:
    http, smtp = free_port(), free_port()
    env = quickstart_env()
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'pigeonhole.sqlite3'}"
    env["DATA_DIR"] = str(tmp_path)
    seen = _when_serving(
        ["serve", "--port", str(http), "--smtp-port", str(smtp)], smtp, env, tmp_path
    )
    modules = set(seen["modules"])
    assert "daphne.server" in modules and "mail.smtpd.server" in modules
    assert _loaded(modules, _NEVER_BEFORE_SERVING) == [], _loaded(modules, _NEVER_BEFORE_SERVING)
    assert tuple(seen["gc"]) == settings.WEB_GC_THRESHOLDS  # config.asgi's, once it serves


def _greets(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.settimeout(10)
            return sock.recv(3) == b"220"
    except OSError:
        return False


def test_smtpd_stopped_while_its_writer_starts_exits_cleanly() -> None:
    """A supervisor's stop goes to the whole process group: the writer, still starting, dies of
    it before it ignores signals. The smtpd stops as asked (status 0, no traceback)."""
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "SMTP_WRITER": "process"}
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "smtpd", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        while not _greets(port):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGTERM)  # at once: the writer is (usually) still starting
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, (out, err)
    assert "Traceback" not in err, err


@pytest.mark.django_db
def test_a_migrated_database_is_not_migrated_again() -> None:
    """``serve --migrate`` and ``pigeonhole-server`` at a start: nothing to apply, nothing runs
    (a first start, which has everything to apply, is make run's test: tests/test_quickstart.py)."""
    from config.migrate import migrate_if_needed

    assert migrate_if_needed(verbosity=0) is False
