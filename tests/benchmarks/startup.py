"""``python -m tests.benchmarks.startup [--runs 5] [--only smtpd|web|serve|server]``: how long a
process takes from exec to serving, measured from outside (issue 32, point 5).

Four commands, each started ``--runs`` times after one unmeasured warm-up start (a supervisor's
restart and a CI job's start find the bytecode and the files in the page cache), each run ended by
SIGTERM before the next:

- ``smtpd``: the Procfile's ``smtp`` (``manage.py smtpd``) on PostgreSQL and Redis; ready when a
  connection gets the ``220`` greeting.
- ``web``: the Procfile's ``web`` (``python -m config.web ... config.asgi:application``, daphne);
  ready when ``GET /healthz`` answers 200 (the database and Redis checked).
- ``serve``: the embedded server, ``manage.py serve`` (what ``make run`` ends with, after its
  ``migrate`` and ``bootstrap``) on a migrated SQLite file; ready when ``/healthz`` answers 200
  *and* SMTP greets.
- ``make-run``: ``make run`` with nothing to install, in a fresh copy of the committed tree
  (``tests.quickstart``: a clone's files and a ready ``.venv``) after its first run made the
  database and the demo workspace; ready as ``serve``.
- ``server``: the console command of the pip-installed server, ``pigeonhole-server`` (migrate,
  bootstrap and serve in one process) on a data directory made by the warm-up start; ready as
  ``serve``.

The processes run without ``PYTHONDONTWRITEBYTECODE`` (the warm-up start leaves the bytecode a
deployment has). The figure is the median wall time from just before ``fork``/``exec`` to ready,
with the CPU the process and its children (the smtpd's writer; ``make``'s steps) had used by then
beside it: on a machine that other work shares, CPU seconds say what the start costs and wall seconds
what a waiting client sees. Targets (issue 32): ``smtpd`` within 1 s, the embedded server (the
three commands) within 1.5 s; ``web`` has none and is reported. Where a target is missed, the
process is started once more with ``-X importtime`` and the report lists its top-level imports
that cost the most. Exit status 1 when a target is missed (``--report-only``: 0, saying so;
``make bench`` runs it so, and its summary fails on the miss).

Writes ``results/startup.{json,md}``; PostgreSQL gets a database of its own
(``<BENCH_DATABASE>_startup``), created, migrated and dropped here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.benchmarks import database
from tests.benchmarks.stack import CLOCK_TICKS, RESULTS, child_env
from tests.live import ROOT, descendants, free_port

# Seconds from exec to serving (issue 32, point 5); None: measured, no target.
TARGETS: dict[str, float | None] = {
    "smtpd": 1.0,
    "web": None,
    "serve": 1.5,
    "make-run": 1.5,
    "server": 1.5,
}
POLL_SECONDS = 0.01
TIMEOUT_SECONDS = 60.0
TOP_IMPORTS = 12


@dataclass
class Command:
    name: str
    argv: list[str]
    env: dict[str, str]
    http_port: int | None = None
    smtp_port: int | None = None
    what: str = ""
    cwd: Path = ROOT


@dataclass
class Result:
    name: str
    what: str
    runs_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    target_s: float | None = None
    top_imports: list[tuple[str, float]] = field(default_factory=list)
    import_total_s: float | None = None

    @property
    def median_s(self) -> float:
        return statistics.median(self.runs_s)

    @property
    def median_cpu_s(self) -> float:
        return statistics.median(self.cpu_s)

    @property
    def met(self) -> bool | None:
        return None if self.target_s is None else self.median_s <= self.target_s


def _smtp_greets(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.settimeout(2)
            return sock.recv(64).startswith(b"220")
    except OSError:
        return False


def _healthz_ok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.settimeout(5)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            return sock.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def _tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its descendants, with those of the children that ended and
    were waited for (``make run``'s steps, before it was one process)."""
    total = 0.0
    for each in [pid, *descendants(pid)]:
        with contextlib.suppress(OSError, ValueError):  # it ended meanwhile
            stat = Path(f"/proc/{each}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            total += sum(int(v) for v in fields[11:15]) / CLOCK_TICKS  # utime stime cutime cstime
    return total


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the process group (``make`` and its server; the smtpd and its writer)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _warm_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` without ``PYTHONDONTWRITEBYTECODE``: a deployment runs from compiled bytecode
    (pip compiles a wheel's at install, a checkout's first run writes it), and the warm-up start
    writes it here; with the variable set every start compiled the project's modules again."""
    return {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}


def start_once(command: Command, *, log: Path, extra_env: dict[str, str] | None = None):
    """Starts the command, waits until it serves; returns (seconds, CPU seconds, process)."""
    env = _warm_env({**command.env, **(extra_env or {})})
    with log.open("ab") as out:
        started = time.monotonic()
        proc = subprocess.Popen(
            command.argv,
            cwd=command.cwd,
            env=env,
            stdout=out,
            stderr=out,
            start_new_session=True,  # the command and its children: one group to stop
        )
    http_at = None if command.http_port else started
    smtp_at = None if command.smtp_port else started
    while http_at is None or smtp_at is None:
        if proc.poll() is not None:
            raise RuntimeError(f"{command.name} exited with {proc.returncode}; see {log}")
        if time.monotonic() - started > TIMEOUT_SECONDS:
            _stop(proc)
            raise TimeoutError(f"{command.name} did not serve within {TIMEOUT_SECONDS:.0f}s")
        if smtp_at is None and _smtp_greets(command.smtp_port):
            smtp_at = time.monotonic()
        if http_at is None and _healthz_ok(command.http_port):
            http_at = time.monotonic()
        if http_at is None or smtp_at is None:
            time.sleep(POLL_SECONDS)
    return max(http_at, smtp_at) - started, _tree_cpu(proc.pid), proc


def import_profile(command: Command, log: Path) -> tuple[list[tuple[str, float]], float]:
    """One more start under ``-X importtime``: the top-level imports that cost the most
    (cumulative seconds) and the seconds all imports took."""
    trace = log.with_suffix(".importtime")
    env = _warm_env({**command.env, "PYTHONPROFILEIMPORTTIME": "1"})
    with trace.open("wb") as err:
        proc = subprocess.Popen(
            command.argv,
            cwd=command.cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while time.monotonic() < deadline and proc.poll() is None:
            ready = (not command.smtp_port or _smtp_greets(command.smtp_port)) and (
                not command.http_port or _healthz_ok(command.http_port)
            )
            if ready:
                break
            time.sleep(0.05)
    finally:
        _stop(proc)
    return parse_importtime(trace.read_text(errors="replace"))


def parse_importtime(text: str) -> tuple[list[tuple[str, float]], float]:
    """(the top-level imports by cumulative seconds, the sum of all top-level imports) of the
    first process: a child (the smtpd's writer) inherits the tracing and writes to the same
    stream, and its lines start with a second top-level ``site``."""
    top: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|", 2)
        if name.startswith("  ") or not cumulative.strip().isdigit():
            continue  # nested: counted in its top-level import
        if name.strip() == "site" and "site" in top:
            break
        top[name.strip()] = top.get(name.strip(), 0.0) + int(cumulative) / 1e6
    ranked = sorted(top.items(), key=lambda item: -item[1])
    return ranked[:TOP_IMPORTS], sum(top.values())


def commands(pg_url: str, redis_url: str, workdir: Path, copy: Path | None) -> list[Command]:
    env = child_env(pg_url, redis_url)
    embedded = {
        key: value
        for key, value in env.items()
        if key not in {"REDIS_URL", "DATABASE_URL", "SMTP_WRITER"}
    }
    sqlite = workdir / "serve" / "pigeonhole.sqlite3"
    sqlite.parent.mkdir(parents=True, exist_ok=True)
    serve_env = {
        **embedded,
        "DATABASE_URL": f"sqlite:///{sqlite}",
        "DATA_DIR": str(sqlite.parent),
    }
    smtp, web, serve_http, serve_smtp, server_http, server_smtp, make_http, make_smtp = (
        free_port() for _ in range(8)
    )
    script = Path(sys.executable).parent / "pigeonhole-server"
    # The installed console script; from a checkout without one, what it runs.
    server = (
        [str(script)]
        if script.exists()
        else [sys.executable, "-c", "import sys; from config.server import main; sys.exit(main())"]
    )
    make_run = []
    if copy is not None:
        from tests.quickstart import quickstart_env

        make_run.append(
            Command(
                "make-run",
                ["make", "run", f"PORT={make_http}", f"SMTP_PORT={make_smtp}"],
                {k: v for k, v in quickstart_env().items() if k != "PYTHONPATH"},
                http_port=make_http,
                smtp_port=make_smtp,
                what="`make run`, nothing to install (a fresh copy): exec → `/healthz` 200 and 220",
                cwd=copy,
            )
        )
    return [
        Command(
            "smtpd",
            [sys.executable, "manage.py", "smtpd", "--host", "127.0.0.1", "--port", str(smtp)],
            env,
            smtp_port=smtp,
            what="`manage.py smtpd` (Procfile `smtp`): exec → 220 greeting",
        ),
        Command(
            "web",
            [
                sys.executable,
                "-m",
                "config.web",
                "-b",
                "127.0.0.1",
                "-p",
                str(web),
                "config.asgi:application",
            ],
            env,
            http_port=web,
            what="daphne (Procfile `web`): exec → `/healthz` 200",
        ),
        Command(
            "serve",
            [
                sys.executable,
                "manage.py",
                "serve",
                "--port",
                str(serve_http),
                "--smtp-port",
                str(serve_smtp),
            ],
            serve_env,
            http_port=serve_http,
            smtp_port=serve_smtp,
            what="embedded `manage.py serve` (`make run`'s last step): exec → `/healthz` 200 and 220",
        ),
        Command(
            "server",
            [
                *server,
                "--data-dir",
                str(workdir / "server"),
                "--http-port",
                str(server_http),
                "--smtp-port",
                str(server_smtp),
                "--key-file",
                str(workdir / "server-key"),
            ],
            embedded,
            http_port=server_http,
            smtp_port=server_smtp,
            what="`pigeonhole-server` (migrate, bootstrap, serve): exec → `/healthz` 200 and 220",
        ),
        *make_run,
    ]


def measure(command: Command, runs: int, log: Path) -> Result:
    result = Result(command.name, command.what, target_s=TARGETS[command.name])
    for index in range(runs + 1):  # the first one warms up, unmeasured
        seconds, cpu, proc = start_once(command, log=log)
        _stop(proc)
        if index:
            result.runs_s.append(round(seconds, 3))
            result.cpu_s.append(round(cpu, 3))
        time.sleep(0.3)  # its sockets closed, its children gone
    if result.met is False:
        result.top_imports, result.import_total_s = import_profile(command, log)
    return result


def markdown(results: list[Result], runs: int, report_only: bool) -> str:
    out = [
        f"Start-up, exec → serving, median of {runs} warm starts (CPU: the process and its "
        "children, until ready):",
        "",
        "| process | median | runs | CPU to ready (median) | target | met |",
        "|---|---:|---|---:|---:|:---:|",
    ]
    for r in results:
        runs_text = ", ".join(f"{s:.2f}" for s in r.runs_s)
        target = "—" if r.target_s is None else f"≤ {r.target_s:.1f} s"
        met = {None: "—", True: "yes", False: "**no**"}[r.met]
        out.append(
            f"| {r.what} | {r.median_s:.2f} s | {runs_text} | {r.median_cpu_s:.2f} s | "
            f"{target} | {met} |"
        )
    for r in results:
        if r.met is False and r.top_imports:
            out += [
                "",
                f"What is left of `{r.name}`'s start (one start under `-X importtime`; imports "
                f"took {r.import_total_s:.2f} s of it, slower than without the tracing):",
                "",
                "| top-level import | cumulative |",
                "|---|---:|",
                *(f"| `{name}` | {seconds * 1000:.0f} ms |" for name, seconds in r.top_imports),
            ]
    if report_only:
        out += ["", "Run with `--report-only`: a missed target is reported, not failed."]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.startup", description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", choices=sorted(TARGETS), action="append")
    parser.add_argument("--report-only", action="store_true", help="exit 0 when a target is missed")
    args = parser.parse_args(argv)
    base_url = os.environ.get("DATABASE_URL") or database.DEFAULT_DATABASE_URL
    redis_url = os.environ.get("REDIS_URL") or database.DEFAULT_REDIS_URL
    name = f"{database.BENCH_DB}_startup"
    pg_url = database.with_database(base_url, name)
    RESULTS.mkdir(parents=True, exist_ok=True)
    log = RESULTS / "startup.log"
    log.write_text("")
    chosen = set(args.only or TARGETS)
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="pigeonhole-startup-") as tmp:
        workdir = Path(tmp)
        _recreate(base_url, name)
        try:
            copy = None
            if "make-run" in chosen:
                from tests.quickstart import fresh_copy

                copy = fresh_copy(workdir / "copy")
            every = commands(pg_url, redis_url, workdir, copy)
            subprocess.run(
                [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
                cwd=ROOT,
                env=every[0].env,
                check=True,
            )
            subprocess.run(
                [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
                cwd=ROOT,
                env=every[2].env,
                check=True,
            )
            for command in every:
                if command.name in chosen:
                    print(f"[startup] {command.name}: {args.runs} starts", flush=True)
                    results.append(measure(command, args.runs, log))
        finally:
            _drop(base_url, name)
    text = markdown(results, args.runs, args.report_only)
    (RESULTS / "startup.md").write_text(text + "\n")
    (RESULTS / "startup.json").write_text(
        json.dumps(
            {r.name: {**asdict(r), "median_s": r.median_s, "met": r.met} for r in results},
            indent=2,
        )
    )
    print(text)
    missed = [r.name for r in results if r.met is False]
    if missed:
        print(f"startup: target missed: {', '.join(missed)}", flush=True)
    return 1 if missed and not args.report_only else 0


def _recreate(url: str, name: str) -> None:
    from psycopg import sql

    with database._maintenance(url) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def _drop(url: str, name: str) -> None:
    from psycopg import sql

    with database._maintenance(url) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


if __name__ == "__main__":
    sys.exit(main())
