"""A fresh copy of the repository and the embedded quick start run in it, for the tests of
``make run`` and the README's tour (issue 25): what a new user gets from a clone.

The copy holds the committed files only (``git archive HEAD``), as a clone would. Its ``.venv``
is a real virtual environment of the base interpreter whose ``site-packages`` is the test
environment's, stamped as installed, so ``make run`` goes through the real Makefile target
without a minute of pip (the project itself is imported from the copy: ``manage.py``'s
directory comes first on ``sys.path``).
"""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import httpx

from tests.live import ROOT, drain, free_port

# Settings of the suite's own run that must not reach a new user's embedded quick start.
_NOT_INHERITED = (
    "DATABASE_URL",
    "REDIS_URL",
    "CELERY_TASK_ALWAYS_EAGER",
    "DJANGO_SETTINGS_MODULE",
    "SECRET_KEY",
    "MAKEFLAGS",
    "MFLAGS",
    "MAKELEVEL",
    "PORT",
    "SMTP_PORT",
    "VIRTUAL_ENV",
)


def fresh_copy(dest: Path) -> Path:
    """The committed tree of HEAD in ``dest``, with a ready ``.venv``."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", "HEAD"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    venv = dest / ".venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    site.rmdir()
    site.symlink_to(sysconfig.get_path("purelib"), target_is_directory=True)
    (venv / ".installed").touch()  # newer than the archive's pyproject.toml: nothing to install
    return dest


def quickstart_env() -> dict[str, str]:
    """A new user's environment: this one without the suite's database, Redis and make state."""
    env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
    env["PYTHONUNBUFFERED"] = "1"
    return env


class MakeRun:
    """``make run`` in a copy, on free ports, until :meth:`stop`; ``output`` collects its
    stdout and stderr lines."""

    def __init__(self, copy: Path) -> None:
        self.copy = copy
        self.port, self.smtp_port = free_port(), free_port()
        self.output: collections.deque[str] = collections.deque(maxlen=5000)
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120) -> MakeRun:
        self.proc = subprocess.Popen(
            ["make", "run", f"PORT={self.port}", f"SMTP_PORT={self.smtp_port}"],
            cwd=self.copy,
            env=quickstart_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # make and its children: one process group to stop
        )
        assert self.proc.stdout is not None
        drain(self.proc.stdout, self.output)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"make run exited with {self.proc.returncode}:\n" + "\n".join(self.output)
                )
            try:
                if httpx.get(self.base_url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError("make run did not answer:\n" + "\n".join(self.output))
            time.sleep(0.2)
        # The banner is written once SMTP listens too (serve's ready callback).
        while not any(line.startswith("Pigeonhole: ") for line in self.output):
            if time.monotonic() > deadline:
                raise TimeoutError("no start-up banner:\n" + "\n".join(self.output))
            time.sleep(0.1)
        return self

    def stop(self) -> None:
        """Ctrl-C, as a user stops it."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.proc = None

    def text(self) -> str:
        return "\n".join(self.output)

    def admin_key(self) -> str:
        keys = re.findall(r"^admin key\s+(pgh_\S+)$", self.text(), re.MULTILINE)
        assert len(keys) == 1, self.text()
        return keys[0]
