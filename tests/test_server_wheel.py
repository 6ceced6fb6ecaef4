"""The server in one pip command (issue 27, item 4): the wheel ``pip wheel .`` builds, installed
with the client into a fresh virtual environment outside the checkout, runs as
``pigeonhole-server`` and serves the client's CLI: ``inbox create``, mail over SMTP, ``wait
--code``; SIGTERM and Ctrl-C stop it with status 0, and a second start keeps the key.

Nothing comes from a package index: both wheels are built without build isolation from copies of
the tree (an in-tree build would leave ``build/`` and ``*.egg-info`` in the checkout), and the new
environment sees the dependencies through a ``.pth`` file naming a directory of links to this
environment's packages, all but the project's own editable install and the client.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import signal
import smtplib
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path

import httpx
import pytest

from tests.live import ROOT, drain, free_port

# The project's packages in the wheel, and where templates/ and static/ go in it.
PACKAGES = ("config", "events", "apikeys", "inboxes", "labels", "mail", "outbox", "webhooks")
MAPPED = {"templates/": "config/_templates/", "static/": "config/_static/"}
# Names in this environment's site-packages the new one must not see: the project's editable
# install (it would import config from the checkout) and the client, installed from its wheel.
_NOT_LINKED = re.compile(r"^(__editable__|pigeonhole|__pycache__$)|\.pth$")


@dataclass
class Installed:
    venv: Path
    server_wheel: Path
    home: Path  # a directory outside the checkout: the processes' working directory
    figures: list[str]  # how long building and installing took

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)

    def env(self) -> dict[str, str]:
        """A CI job's environment: no PYTHONPATH to the checkout, and a DATABASE_URL and a
        REDIS_URL of the job's own application (nothing listens there), which the server must
        leave alone."""
        return {
            "PATH": f"{self.venv / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "PYTHONUNBUFFERED": "1",
            "DATABASE_URL": "postgres://app@127.0.0.1:9/the-apps-own-database",
            "REDIS_URL": "redis://127.0.0.1:9/0",
        }


def _copy_tree(source: Path, dest: Path) -> Path:
    """The files git tracks or would track (not ignored) under ``source``, as they are now."""
    listed = subprocess.run(
        ["git", "-C", str(source), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        if (source / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, dest / name)
    return dest


def _build_wheel(source: Path, out: Path) -> Path:
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*pip, "--no-index", "--quiet", "--wheel-dir", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = [w for w in out.glob("*.whl") if w.name not in _built]
    _built.add(wheel.name)
    return wheel


_built: set[str] = set()


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    figures: list[str] = []
    base = tmp_path_factory.mktemp("server-wheel")
    dist = base / "dist"
    started = time.monotonic()
    server_wheel = _build_wheel(_copy_tree(ROOT, base / "src"), dist)
    client_wheel = _build_wheel(_copy_tree(ROOT / "clients" / "python", base / "client"), dist)
    figures.append(f"server wheel: both wheels built in {time.monotonic() - started:.1f} s")

    started = time.monotonic()
    venv = base / "venv"
    interpreter = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([interpreter, "-m", "venv", "--without-pip", str(venv)], check=True)
    links = base / "deps"
    links.mkdir()
    ours = Path(sysconfig.get_path("purelib"))
    for entry in ours.iterdir():
        if not _NOT_LINKED.search(entry.name):
            (links / entry.name).symlink_to(entry)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    (site / "deps.pth").write_text(f"{links}\n")
    home = base / "elsewhere"
    home.mkdir()
    result = Installed(venv, server_wheel, home, figures)
    pip = [result.bin("python"), "-m", "pip", "install", "--no-deps", "--no-index", "--quiet"]
    subprocess.run(
        [*pip, str(server_wheel), str(client_wheel)],
        check=True,
        capture_output=True,
        cwd=home,
        env=result.env(),
    )
    figures.append(f"server wheel: venv and install in {time.monotonic() - started:.1f} s")
    return result


class Server:
    """``pigeonhole-server`` of the new environment, in a directory outside the checkout."""

    def __init__(self, installed: Installed, data_dir: Path, *extra: str) -> None:
        self.http_port, self.smtp_port = free_port(), free_port()
        self.output: collections.deque[str] = collections.deque(maxlen=2000)
        argv = [installed.bin("pigeonhole-server"), "--data-dir", str(data_dir)]
        argv += ["--http-port", str(self.http_port), "--smtp-port", str(self.smtp_port)]
        argv += ["--domain", "ci.pigeonhole.test", *extra]
        self.proc = subprocess.Popen(
            argv,
            cwd=installed.home,
            env=installed.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        assert self.proc.stdout is not None
        drain(self.proc.stdout, self.output)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def text(self) -> str:
        return "\n".join(self.output)

    def wait_healthy(self, timeout: float = 120) -> float:
        """Seconds from now until /healthz answers 200 and the banner says SMTP listens too."""
        started = time.monotonic()
        while True:
            assert self.proc.poll() is None, f"exited {self.proc.returncode}:\n{self.text()}"
            assert time.monotonic() - started < timeout, f"no /healthz:\n{self.text()}"
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        took = time.monotonic() - started
        while not any(line.startswith("Pigeonhole: ") for line in self.output):
            assert time.monotonic() - started < timeout, f"no banner:\n{self.text()}"
            time.sleep(0.1)
        return took

    def stop(self, sig: int) -> int:
        """Sends ``sig``; the exit status, which must come within 20 seconds."""
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"still running 20 s after {sig!r}:\n{self.text()}") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _tracked(prefix: str) -> list[str]:
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", prefix], check=True, capture_output=True, text=True
    ).stdout
    return listed.split()


def test_the_wheel_holds_the_apps_their_migrations_templates_and_static(
    installed: Installed, figure: Callable[[str], None]
) -> None:
    for line in installed.figures:
        figure(line)
    names = set(zipfile.ZipFile(installed.server_wheel).namelist())
    expected = set()
    for package in PACKAGES:
        expected |= {name for name in _tracked(f"{package}/") if "/." not in f"/{name}"}
    for source, target in MAPPED.items():
        expected |= {
            target + name[len(source) :]
            for name in _tracked(source)
            if not name.rsplit("/", 1)[-1].startswith(".")
        }
    assert any("/migrations/0001_" in name for name in expected)
    assert sorted(expected - names) == []
    # Nothing at the top of site-packages but the project's packages and its metadata.
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {*PACKAGES, "pigeonhole-0.1.0.dist-info"}
    entry_points = zipfile.ZipFile(installed.server_wheel).read(
        "pigeonhole-0.1.0.dist-info/entry_points.txt"
    )
    assert b"pigeonhole-server = config.server:main" in entry_points


def test_the_installed_server_serves_the_cli_and_stops_on_sigterm(
    installed: Installed, tmp_path: Path, figure: Callable[[str], None]
) -> None:
    where = subprocess.run(
        [installed.bin("python"), "-c", "import config; print(config.__file__)"],
        cwd=installed.home,
        env=installed.env(),
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert where.startswith(str(installed.venv) + "/"), where

    data_dir, key_file = tmp_path / "data", tmp_path / "admin.key"
    server = Server(installed, data_dir, "--key-file", str(key_file))
    try:
        took = server.wait_healthy()
        figure(f"server wheel: pigeonhole-server start to /healthz in {took:.1f} s")
        key = key_file.read_text().strip()
        assert key.startswith("pgh_") and key_file.stat().st_mode & 0o777 == 0o600
        # Written for scripts, not printed to the job's log, and no more is the password.
        assert key not in server.text()
        password = (data_dir / "dashboard-password").read_text().strip()
        assert password not in server.text() and "dashboard-password" in server.text()
        assert (data_dir / "pigeonhole.sqlite3").is_file()

        cli_env = {**installed.env(), "PIGEONHOLE_URL": server.url, "PIGEONHOLE_API_KEY": key}

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [installed.bin("pigeonhole"), *args],
                cwd=installed.home,
                env=cli_env,
                capture_output=True,
                text=True,
                timeout=90,
            )

        created = cli("inbox", "create", "--local-part", "signup")
        assert created.returncode == 0, created.stderr
        address = created.stdout.strip()
        assert address.endswith("@ci.pigeonhole.test"), address

        message = EmailMessage()
        message["From"] = "Shop <noreply@shop.example>"
        message["To"] = address
        message["Subject"] = "Your sign-up code"
        message.set_content("Welcome!\n\nYour code is 739201.\n")
        with smtplib.SMTP("127.0.0.1", server.smtp_port, timeout=30) as smtp:
            smtp.send_message(message)

        waited = cli("wait", "--inbox", address, "--code", "--timeout", "60")
        assert (waited.returncode, waited.stdout) == (0, "739201\n"), waited.stderr

        started = time.monotonic()
        assert server.stop(signal.SIGTERM) == 0, server.text()
        figure(f"server wheel: SIGTERM to exit in {time.monotonic() - started:.1f} s")
        assert "Traceback" not in server.text(), server.text()
    finally:
        server.kill()


def test_a_second_start_with_the_same_data_dir_keeps_the_key_and_ctrl_c_stops_it(
    installed: Installed, tmp_path: Path, figure: Callable[[str], None]
) -> None:
    data_dir, key_file = tmp_path / "data", tmp_path / "admin.key"
    first = Server(installed, data_dir, "--key-file", str(key_file))
    try:
        first.wait_healthy()
        assert first.stop(signal.SIGTERM) == 0, first.text()
    finally:
        first.kill()
    key = key_file.read_text().strip()

    # Without --key-file the key is printed: the same one, kept in the data directory.
    second = Server(installed, data_dir)
    try:
        second.wait_healthy()
        printed = re.findall(r"^admin key\s+(pgh_\S+)$", second.text(), re.MULTILINE)
        assert printed == [key], second.text()
        password = (data_dir / "dashboard-password").read_text().strip()
        assert f"admin@ci.pigeonhole.test / {password}" in second.text()
        answer = httpx.get(
            second.url + "/api/v1/inboxes", headers={"Authorization": f"Bearer {key}"}, timeout=10
        )
        assert answer.status_code == 200, answer.text
        assert second.stop(signal.SIGINT) == 0, second.text()
        assert "Traceback" not in second.text(), second.text()
    finally:
        second.kill()
