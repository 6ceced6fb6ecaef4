"""Celery beat run from a checkout keeps its schedule under ``var/`` and leaves the tree clean
(issue 25, item 6): ``celerybeat-schedule*`` files used to appear beside manage.py, untracked
and not ignored. The schedule itself is a setting (issue 27, item 4)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.quickstart import fresh_copy, quickstart_env

pytestmark = pytest.mark.live


def _git(copy: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(copy), *args], check=True, capture_output=True, text=True
    ).stdout


def test_beat_keeps_its_schedule_under_var_and_git_status_stays_clean(tmp_path: Path) -> None:
    copy = fresh_copy(tmp_path / "pigeonhole")
    _git(copy, "init", "-q")
    _git(copy, "add", "-A")
    _git(copy, "-c", "user.name=t", "-c", "user.email=t@x.test", "commit", "-qm", "copy")
    # The Procfile's beat, as written there (embedded settings: its broker is in memory, so
    # the jobs it sends go nowhere).
    procfile = (copy / "Procfile").read_text()
    beat = next(line for line in procfile.splitlines() if line.startswith("beat:"))
    argv = beat.split(":", 1)[1].split()
    assert argv[0] == "celery"
    proc = subprocess.Popen(
        [sys.executable, "-m", *argv],
        cwd=copy,
        env=quickstart_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not list((copy / "var").glob("celerybeat-schedule*")):
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "beat wrote no schedule under var/"
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert not list(copy.glob("celerybeat-schedule*"))
    assert _git(copy, "status", "--porcelain") == ""


def test_the_schedule_is_a_setting_and_importing_the_project_reads_no_settings() -> None:
    """``pigeonhole-server`` (config.server) imports the project, then sets the environment the
    settings are read from (its data directory, the embedded database): the Celery app used to
    read the sweep intervals from the settings at import, which loaded them too early."""
    from django.conf import settings

    from config.celery import app

    assert app.conf.beat_schedule == settings.CELERY_BEAT_SCHEDULE
    assert app.conf.beat_schedule["sweep-outbox-deliveries"]["schedule"] == (
        settings.OUTBOX_SWEEP_EVERY
    )
    probe = "import config.server; from django.conf import settings; print(settings.configured)"
    env = {k: v for k, v in quickstart_env().items() if k != "DJANGO_SETTINGS_MODULE"}
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=Path(__file__).resolve().parent.parent,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "False", result.stderr
