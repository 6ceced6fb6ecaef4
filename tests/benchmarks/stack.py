"""The processes under test, started as the Procfile starts them, and what /proc says of them.

``smtp`` is ``manage.py smtpd --host 127.0.0.1 --port P`` and ``web`` is ``python -m config.web -b
127.0.0.1 -p P config.asgi:application`` (tests.live's ``Process``), with the production
database settings (a psycopg pool per process). Their output goes to log files under ``results/`` rather than to an unread pipe,
which would block a chatty process once 64 KiB of logs piled up.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.live import ROOT, Process, free_port

RESULTS = Path(__file__).resolve().parent / "results"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# One key opens thousands of requests a minute here; production limits are per key and would
# answer 429. The counter is still incremented in Redis on every request, so the cost stays.
BENCH_RATE_LIMIT = "1000000000"
# Likewise one key holds every waiter and stream of the real-time scenarios (thousands at once),
# past the per-key cap on open waits and streams; the slot is still taken and given back in Redis.
BENCH_OPEN_STREAMS = "1000000"


def raise_open_files() -> int:
    """Raises this process's soft RLIMIT_NOFILE to the hard limit (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def child_env(bench_url: str, redis_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=bench_url,
        REDIS_URL=redis_url,
        PYTHONUNBUFFERED="1",
        RATE_LIMIT_PER_MINUTE=BENCH_RATE_LIMIT,
        MAX_OPEN_STREAMS_PER_KEY=BENCH_OPEN_STREAMS,
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    return env


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"port {port} did not open")


class LoggedProcess(Process):
    """``tests.live.Process`` whose stdout and stderr go to a log file."""

    def __init__(self, argv: list[str], port: int, env: dict[str, str], log: Path) -> None:
        super().__init__(argv, port, env)
        self.log = log

    def start(self) -> LoggedProcess:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        _wait_port(self.port, self.proc)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid


class BenchStack:
    """One SMTP receiver for the whole run; a fresh web process for each scenario."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.smtp_port, self.http_port = free_port(), free_port()
        self.smtp = LoggedProcess(
            [
                sys.executable,
                "manage.py",
                "smtpd",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.smtp_port),
            ],
            self.smtp_port,
            env,
            RESULTS / "smtpd.log",
        )
        self.web = LoggedProcess(
            [
                sys.executable,
                "-m",
                "config.web",
                "-b",
                "127.0.0.1",
                "-p",
                str(self.http_port),
                "config.asgi:application",
            ],
            self.http_port,
            env,
            RESULTS / "web.log",
        )

    def start_smtp(self) -> None:
        self.smtp.start()

    def fresh_web(self) -> None:
        self.web.stop()
        self.web.start()

    def stop(self) -> None:
        self.web.stop()
        self.smtp.stop()


def rss_kb(pid: int, field: str = "VmRSS") -> int:
    """A ``/proc/<pid>/status`` memory figure in kB (VmRSS, VmHWM …)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _service_cpu(database: str) -> dict[int, tuple[str, float]]:
    """Per pid: (``postgres`` or ``redis``, CPU seconds so far) of the PostgreSQL backends
    serving ``database`` and of Redis."""
    out: dict[int, tuple[str, float]] = {}
    marker = f" {database} ".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = stat[stat.index("(") + 1 : stat.rindex(")")]
            if command == "postgres":
                if marker not in (entry / "cmdline").read_bytes().replace(b"\0", b" ") + b" ":
                    continue
                name = "postgres"
            elif command == "redis-server":
                name = "redis"
            else:
                continue
        except (OSError, ValueError):
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        out[int(entry.name)] = (name, (int(fields[11]) + int(fields[12])) / CLOCK_TICKS)
    return out


def postgres_cpu_seconds(database: str) -> float:
    """CPU seconds so far of the PostgreSQL backends serving ``database`` (those alive now)."""
    return sum(used for name, used in _service_cpu(database).values() if name == "postgres")


def _xacts(database_url: str, database: str) -> int | None:
    """Committed + rolled-back transactions of ``database`` so far (pg_stat_database; the
    statistics lag by up to a second). Each autocommit query of Django is one."""
    if not database_url:
        return None
    import psycopg

    try:
        with psycopg.connect(database_url, connect_timeout=5) as conn:
            row = conn.execute(
                "SELECT pg_stat_force_next_flush(), xact_commit + xact_rollback "
                "FROM pg_stat_database WHERE datname = %s",
                [database],
            ).fetchone()
    except psycopg.Error:
        return None
    return int(row[1]) if row else None


def _cpu_jiffies() -> list[int]:
    """user nice system idle iowait irq softirq steal of all CPUs from /proc/stat."""
    return [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]


def machine_busy_pct(seconds: float = 1.0) -> float:
    """How busy all CPUs are (steal excluded), in % of the machine, over ``seconds``."""
    before = _cpu_jiffies()
    time.sleep(seconds)
    delta = [b - a for a, b in zip(before, _cpu_jiffies(), strict=True)]
    total = sum(delta) or 1
    return 100 * (total - delta[3] - delta[4] - delta[7]) / total


class CpuWindow:
    """CPU used over a window, in % of one CPU: by the web, SMTP and harness processes, by the
    PostgreSQL backends of the bench database and Redis, and by everything else on the machine
    (``other``: other people's work shares these CPUs); plus the machine's busy and steal time
    in % of all its CPUs."""

    def __init__(self, pids: dict[str, int], database: str, database_url: str = "") -> None:
        self.pids, self.database, self.database_url = pids, database, database_url
        self.xacts = _xacts(database_url, database)
        self.started = time.monotonic()
        self.start = {name: cpu_seconds(pid) for name, pid in pids.items()}
        self.services = _service_cpu(database)
        self.jiffies = _cpu_jiffies()

    def result(self) -> dict[str, float]:
        wall = time.monotonic() - self.started
        out = {"wall_s": round(wall, 2)}
        if not wall:
            return out
        ours = 0.0
        for name, pid in self.pids.items():
            used = cpu_seconds(pid) - self.start[name]
            ours += used
            out[f"{name}_cpu_pct"] = round(100 * used / wall, 1)
        # A backend that ended during the window is not counted (its last figure is gone).
        services = {"postgres": 0.0, "redis": 0.0}
        for pid, (name, used) in _service_cpu(self.database).items():
            services[name] += used - self.services.get(pid, (name, 0.0))[1]
        for name, used in services.items():
            ours += used
            out[f"{name}_cpu_pct"] = round(100 * used / wall, 1)
        delta = [b - a for a, b in zip(self.jiffies, _cpu_jiffies(), strict=True)]
        total = sum(delta) or 1
        busy = total - delta[3] - delta[4] - delta[7]
        cpus = os.cpu_count() or 1
        out["other_cpu_pct"] = round(max(0.0, 100 * busy / total * cpus - 100 * ours / wall), 1)
        out["machine_busy_pct"] = round(100 * busy / total, 1)
        xacts = _xacts(self.database_url, self.database)
        if xacts is not None and self.xacts is not None:
            out["db_xacts_per_s"] = round((xacts - self.xacts) / wall, 1)
        out["machine_steal_pct"] = round(100 * delta[7] / total, 1)
        return out


class Profiler:
    """``py-spy record`` of one process over a window, as collapsed stacks (``--profile``)."""

    def __init__(self, pid: int, out: Path, *, idle: bool = False, rate: int = 250) -> None:
        exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not Path(exe).exists():
            raise SystemExit(
                "bench: --profile needs py-spy (.venv/bin/python -m pip install py-spy)"
            )
        out.parent.mkdir(parents=True, exist_ok=True)
        self.out = out
        self.proc = subprocess.Popen(
            [
                exe,
                "record",
                "--pid",
                str(pid),
                "--rate",
                str(rate),
                "--format",
                "raw",
                "--output",
                str(out),
                "--nonblocking",
                "--threads",
                *(["--idle"] if idle else []),
                *(["--gil"] if os.environ.get("PYSPY_GIL") else []),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> Path:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.out
