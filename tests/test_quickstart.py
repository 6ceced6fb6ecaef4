"""``make run`` as a new user meets it (issue 25, items 1-3): from a fresh copy of the committed
tree, twice, through the real Makefile target (tests/quickstart.py)."""

from __future__ import annotations

import re
import sqlite3
import stat
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.quickstart import MakeRun, fresh_copy, quickstart_env

pytestmark = pytest.mark.live


def _demo_keys(copy: Path) -> list[tuple[str, str | None]]:
    """(key id, revoked_at) of every API key of the demo workspace in the copy's database."""
    with sqlite3.connect(copy / "var" / "pigeonhole.sqlite3") as db:
        return db.execute(
            "SELECT k.id, k.revoked_at FROM apikeys_apikey k "
            "JOIN apikeys_workspace w ON w.id = k.workspace_id WHERE w.name = 'Demo'"
        ).fetchall()


def _admin_index(base_url: str, username: str, password: str) -> httpx.Response:
    """Signs in at /admin/login/ as a browser would and opens /admin/."""
    with httpx.Client(base_url=base_url, timeout=30) as client:
        form = client.get("/admin/login/?next=/admin/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
        assert token, form.text
        client.post(
            "/admin/login/?next=/admin/",
            data={
                "csrfmiddlewaretoken": token.group(1),
                "username": username,
                "password": password,
                "next": "/admin/",
            },
            headers={"Referer": base_url + "/admin/login/"},
        )
        return client.get("/admin/")


def test_make_run_twice_shows_one_demo_key_and_opens_admin(tmp_path: Path) -> None:
    copy = fresh_copy(tmp_path / "pigeonhole")

    first = MakeRun(copy).start()
    try:
        key = first.admin_key()
        banner = first.text()
        me = httpx.get(
            first.base_url + "/api/v1/me", headers={"Authorization": f"Bearer {key}"}, timeout=30
        )
        admin = _admin_index(first.base_url, "demo@pigeonhole.test", "pigeonhole-demo")
    finally:
        first.stop()
    assert me.status_code == 200 and me.json()["scopes"] == ["read", "write", "send", "admin"]
    # Item 3: the demo owner opens the Django admin, and the banner says where it is.
    assert admin.status_code == 200 and "Site administration" in admin.text, admin.text[:500]
    assert f"{first.base_url}/admin/" in banner
    # Item 1: a run with nothing to install installs nothing and says so with no pip output.
    assert "make: installing" not in banner and "Collecting" not in banner
    assert "make run: migrating the database" in banner
    assert "HTTP/2 support not enabled" not in banner  # daphne's start-up chatter

    key_file = copy / "var" / "demo-admin-key"
    assert key_file.read_text().strip() == key
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600

    second = MakeRun(copy).start()
    try:
        again = second.admin_key()
        answer = httpx.get(
            second.base_url + "/api/v1/me",
            headers={"Authorization": f"Bearer {again}"},
            timeout=30,
        )
    finally:
        second.stop()
    assert again == key
    assert "the same key as before" in second.text()
    assert answer.status_code == 200
    keys = _demo_keys(copy)
    assert len(keys) == 1 and keys[0][1] is None, keys


def _plan(copy: Path, target: str) -> list[str]:
    """What ``make TARGET`` would run (``make -n``), without a minute of downloads."""
    return subprocess.run(
        ["make", "-n", target],
        cwd=copy,
        env=quickstart_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()


def _project_installs(plan: list[str]) -> list[str]:
    """The pip commands that install the project (one line may chain several with &&)."""
    commands = [part.strip() for line in plan for part in line.split("&&")]
    return [c for c in commands if re.search(r"pip install .*-e ['\"]?\.", c)]


def test_first_run_prints_its_steps_and_pips_progress(tmp_path: Path) -> None:
    """Item 1: with no .venv yet, make run announces each step and lets pip show its progress;
    it installs the project alone, without the test tools' extras."""
    copy = fresh_copy(tmp_path / "pigeonhole")
    subprocess.run(["rm", "-rf", str(copy / ".venv")], check=True)
    plan = _plan(copy, "run")
    text = "\n".join(plan)
    installs = _project_installs(plan)
    assert len(installs) == 1, text
    assert "--quiet" not in installs[0] and " -q" not in installs[0], text
    assert "[dev]" not in installs[0], text
    assert "creating the virtual environment" in text, text
    # The announcement comes before the install it announces.
    assert 0 <= text.find("about a minute on a first run") < text.index(installs[0]), text


def test_make_install_gets_the_test_tools_with_progress(tmp_path: Path) -> None:
    copy = fresh_copy(tmp_path / "pigeonhole")
    subprocess.run(["rm", "-rf", str(copy / ".venv")], check=True)
    plan = _plan(copy, "install")
    installs = _project_installs(plan)
    assert len(installs) == 1 and "[dev]" in installs[0], plan
    assert "--quiet" not in installs[0] and " -q" not in installs[0], plan
    assert any("installing Pigeonhole" in line for line in plan), plan


def test_without_a_suitable_python_make_run_says_what_it_needs(tmp_path: Path) -> None:
    copy = fresh_copy(tmp_path / "pigeonhole")
    subprocess.run(["rm", "-rf", str(copy / ".venv")], check=True)
    done = subprocess.run(
        ["make", "run", "PYTHON=/nonexistent/python3"],
        cwd=copy,
        env=quickstart_env(),
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "Python 3.11 or newer is required" in done.stderr, done.stderr
    assert "PYTHON=" in done.stderr and not (copy / ".venv").exists()
