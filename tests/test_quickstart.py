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


def test_first_install_prints_its_steps_and_pips_progress(tmp_path: Path) -> None:
    """Item 1: with no .venv yet, make install announces each step and lets pip show its
    progress (``make -n``: what make would run, without a minute of downloads)."""
    copy = fresh_copy(tmp_path / "pigeonhole")
    subprocess.run(["rm", "-rf", str(copy / ".venv")], check=True)
    plan = subprocess.run(
        ["make", "-n", "install"],
        cwd=copy,
        env=quickstart_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = plan.splitlines()
    project = [line for line in lines if "pip install" in line and "-e '.[dev]'" in line]
    assert len(project) == 1 and "--quiet" not in project[0] and " -q" not in project[0], plan
    steps = [line for line in lines if line.startswith("echo ")]
    assert any("creating the virtual environment" in step for step in steps), plan
    assert any("about a minute on a first run" in step for step in steps), plan
    # The announcement comes before the install it announces.
    announce = next(i for i, line in enumerate(lines) if "about a minute" in line)
    assert announce < lines.index(project[0])
