"""The table of figures against targets, the machine and commit, and ``results/latest.*``."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from tests.benchmarks.scenarios import Sizes
from tests.benchmarks.stack import RESULTS
from tests.live import ROOT


@dataclass(frozen=True)
class Row:
    scenario: str
    figure: str
    target: str
    met: bool | None  # None: not measured

    @property
    def met_text(self) -> str:
        return "n/a" if self.met is None else ("yes" if self.met else "**no**")


def _under(value: float | None, limit: float) -> bool | None:
    return None if value is None else value < limit


def _fmt(value: float | None, unit: str) -> str:
    return "n/a" if value is None else f"{value:,.1f} {unit}"


# A wait scenario's percentile is None when it falls on a missed message (a waiter that never
# answered, answered another email, or mail that could not be sent: scenarios._waits): a miss.
def _latency(d: dict, key: str) -> str:
    if d.get(key) is None and d.get("messages_measured"):
        return f"missed ({d.get('missed', '?')} unanswered)"
    return _fmt(d.get(key), "ms")


def _latency_under(d: dict, key: str, limit: float) -> bool | None:
    if d.get(key) is None:
        return False if d.get("messages_measured") else None
    return d[key] < limit


def rows(results: dict[str, dict], sizes: Sizes) -> list[Row]:
    out: list[Row] = []
    if "a" in results:
        a = results["a"]
        label = (
            f"(a) wait: {a['waiters']:,} waiters, {a['target_rate']:g} msg/s, "
            f"{a['delivered']}/{a['messages_measured']} messages, 250 → response"
        )
        out.append(
            Row(label + " p50", _latency(a, "p50_ms"), "< 20 ms", _latency_under(a, "p50_ms", 20))
        )
        out.append(
            Row(
                label + " p99",
                _latency(a, "p99_ms"),
                "< 100 ms",
                _latency_under(a, "p99_ms", 100),
            )
        )
    if "t" in results:
        t = results["t"]
        label = (
            f"(t) wait with `to` filters: {t['waiters']:,} waiters on one inbox, "
            f"{t['target_rate']:g} msg/s, {t['delivered']}/{t['messages_measured']} messages, "
            "250 → response"
        )
        out.append(Row(label + " p50", _latency(t, "p50_ms"), "—", None))
        out.append(
            Row(
                label + " p99",
                _latency(t, "p99_ms"),
                "< 100 ms",
                _latency_under(t, "p99_ms", 100),
            )
        )
    if "b" in results:
        b = results["b"]
        label = (
            f"(b) SSE fan-out: 1 inbox, {b['streams_open']:,} streams, 250 → last stream has "
            f"email.received, {len(b['repeats'])} runs"
        )
        complete = b["incomplete_repeats"] == 0 and b["streams_open"] == b["streams_requested"]
        for key, name in (("last_median_ms", "median"), ("last_max_ms", "max")):
            met = _under(b[key], 250)
            out.append(
                Row(
                    f"{label}, {name}",
                    _fmt(b[key], "ms"),
                    "< 250 ms",
                    met and complete if met is not None else None,
                )
            )
    if "c" in results:
        c = results["c"]
        want = sizes.idle_streams
        out.append(
            Row(
                "(c) idle SSE streams held by one web process",
                f"{c['streams_held']:,} / {c['streams_requested']:,}",
                f"{want:,}",
                c["streams_held"] >= want,
            )
        )
        out.append(
            Row(
                "(c) web RSS per idle stream "
                f"({c['rss_before_kb'] / 1024:,.0f} → {c['rss_after_kb'] / 1024:,.0f} MiB)",
                _fmt(c["kb_per_stream"], "KB"),
                "< 60 KB",
                _under(c["kb_per_stream"], 60),
            )
        )
    if "m" in results:
        out += _mcp_rows(results["m"])
    return out


def _mcp_rows(m: dict) -> list[Row]:
    """(m): MCP wait_for_email beside the REST wait at the same size, on the same process.

    The REST wait is measured twice in the same seconds: through the harness's bare HTTP/1.1
    client (a few lines of asyncio, which no user runs) and through our own async client
    (``pigeonhole_client``, on httpx), as MCP is through the official MCP client. The target
    compares each protocol through its client library: MCP p99 ≤ 1.5 × the REST wait's p99
    through ``pigeonhole_client``. The ratio to the bare client is printed beside it."""
    rest, mcp = m["rest"], m["mcp"]
    client = m.get("client")  # results written before 2026-12-07 have only the bare client
    judge = client or rest
    label = (
        f"(m) MCP wait_for_email: {mcp['waiters']} sessions, {mcp['target_rate']:g} msg/s, "
        f"{mcp['delivered']}/{mcp['messages_measured']} messages, 250 → tool result"
    )
    rest_label = (
        f"(m) REST wait, bare HTTP client: {rest['waiters']} waiters, "
        f"{rest['delivered']}/{rest['messages_measured']} messages, 250 → response"
    )
    judge_p99, mcp_p99 = judge.get("p99_ms"), mcp.get("p99_ms")
    within = _latency_under(mcp, "p99_ms", 150)
    if judge_p99 is not None and mcp_p99 is not None:
        within = mcp_p99 <= 1.5 * judge_p99 and mcp_p99 < 150
    elif judge_p99 is None and judge.get("messages_measured"):
        within = False  # the REST wait missed messages: nothing to hold MCP to
    rows = [
        Row(rest_label + " p50", _latency(rest, "p50_ms"), "—", None),
        Row(rest_label + " p99", _latency(rest, "p99_ms"), "—", None),
    ]
    if client is not None:
        client_label = (
            f"(m) REST wait through pigeonhole_client: {client['waiters']} waiters, "
            f"{client['delivered']}/{client['messages_measured']} messages, 250 → Email"
        )
        rows += [
            Row(
                client_label + f" p50{_client_side(client)}", _latency(client, "p50_ms"), "—", None
            ),
            Row(client_label + " p99", _latency(client, "p99_ms"), "—", None),
        ]
    rest_p99 = rest.get("p99_ms")
    against = "REST p99 through pigeonhole_client" if client is not None else "REST p99"
    rows += [
        Row(label + f" p50{_client_side(mcp)}", _latency(mcp, "p50_ms"), "—", None),
        Row(
            label + " p99",
            _latency(mcp, "p99_ms"),
            f"≤ 1.5 × {against} ({_fmt(judge_p99, 'ms')}) and < 150 ms",
            within,
        ),
    ]
    if client is not None and "to_headers_p50_ms" in client and "to_headers_p50_ms" in mcp:
        rows.append(
            Row(
                "(m) 250 → the response's headers at the client, p50 / p99: MCP ÷ REST through "
                f"pigeonhole_client ({mcp['to_headers_p50_ms']:g} / {mcp['to_headers_p99_ms']:g} "
                f"against {client['to_headers_p50_ms']:g} / {client['to_headers_p99_ms']:g} ms)",
                f"{mcp['to_headers_p50_ms'] / client['to_headers_p50_ms']:.2f}× / "
                f"{mcp['to_headers_p99_ms'] / client['to_headers_p99_ms']:.2f}×",
                "—",
                None,
            )
        )
    if client is not None and rest_p99 and mcp_p99 is not None:
        rows.append(
            Row(
                "(m) MCP p99 ÷ the bare client's REST p99 (clients' own work included in MCP's)",
                f"{mcp_p99 / rest_p99:.2f}×",
                "—",
                None,
            )
        )
    rows.append(
        Row(
            "(m) web RSS per parked MCP session "
            f"(REST waiter: {_fmt(rest.get('kb_per_waiter'), 'KB')})",
            _fmt(mcp.get("kb_per_waiter"), "KB"),
            "—",
            None,
        )
    )
    return rows


def _client_side(kind: dict) -> str:
    """The p50 from the response's headers to the result in the caller's hands (the client
    library's work and the harness loop's turns), when measured."""
    share = kind.get("client_side_p50_ms")
    return "" if share is None else f" (headers → result: {share:g} ms)"


def markdown_table(table: list[Row]) -> str:
    lines = ["| scenario | figure | target | met |", "|---|---:|---:|:---:|"]
    lines += [f"| {r.scenario} | {r.figure} | {r.target} | {r.met_text} |" for r in table]
    return "\n".join(lines)


CPU_COLUMNS = ("web", "smtpd", "harness", "postgres", "redis", "other")


def cpu_table(results: dict[str, dict]) -> str:
    """CPU over each measurement window, in % of one CPU (``other``: the rest of the machine)."""
    lines = [
        "CPU during each measurement, % of one CPU (`other` is everything else on the machine):",
        "",
        "| scenario | "
        + " | ".join(CPU_COLUMNS)
        + " | machine busy | steal | busy before | db xacts/s |",
        "|---|" + "---:|" * (len(CPU_COLUMNS) + 4),
    ]
    for name, result in results.items():
        if "cpu" not in result:
            continue
        cpu = result["cpu"]
        cells = [f"{cpu.get(f'{c}_cpu_pct', 0):.0f}" for c in CPU_COLUMNS]
        lines.append(
            f"| ({name}) | "
            + " | ".join(cells)
            + f" | {cpu.get('machine_busy_pct', 0):.0f}% | {cpu.get('machine_steal_pct', 0):.0f}%"
            + f" | {result.get('machine_busy_before_pct', 0):.0f}%"
            + f" | {cpu.get('db_xacts_per_s', 'n/a')} |"
        )
    return "\n".join(lines)


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def machine() -> dict:
    cpuinfo = _read("/proc/cpuinfo")
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in cpuinfo.splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown",
    )
    meminfo = {
        line.split(":")[0]: line.split(":")[1].strip()
        for line in _read("/proc/meminfo").splitlines()
        if ":" in line
    }
    mem_kb = int(meminfo.get("MemTotal", "0 kB").split()[0])
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_count": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "loadavg_at_start": _read("/proc/loadavg").split()[:3],
    }


def services(database_url: str, redis_url: str) -> dict:
    """Server versions, for the record."""
    out: dict = {}
    try:
        import psycopg

        from tests.benchmarks.database import with_database

        with psycopg.connect(with_database(database_url, "postgres"), connect_timeout=5) as conn:
            out["postgresql"] = conn.execute("SHOW server_version").fetchone()[0]
    except Exception as exc:
        out["postgresql"] = f"unknown ({exc})"
    try:
        import redis

        out["redis"] = redis.Redis.from_url(redis_url, socket_timeout=5).info("server")[
            "redis_version"
        ]
    except Exception as exc:
        out["redis"] = f"unknown ({exc})"
    return out


def git() -> dict:
    """The commit and whether tracked files differ from it (read-only git commands only)."""

    def run(*args: str) -> str:
        try:
            done = subprocess.run(
                ["git", "--no-optional-locks", *args],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=10,
            )
            return done.stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    changed = [
        line[3:] for line in run("status", "--porcelain", "--untracked-files=no").splitlines()
    ]
    return {
        "commit": run("rev-parse", "HEAD") or "unknown",
        "subject": run("log", "-1", "--format=%s"),
        "tracked_files_modified": len(changed),
        "modified": changed,
    }


def write(
    *,
    table: list[Row],
    results: dict[str, dict],
    sizes: Sizes,
    quick: bool,
    meta: dict,
) -> tuple[Path, Path]:
    RESULTS.mkdir(parents=True, exist_ok=True)
    document = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": "quick" if quick else "full",
        **meta,
        "sizes": asdict(sizes),
        "table": [asdict(r) for r in table],
        "scenarios": results,
    }
    json_path = RESULTS / "latest.json"
    json_path.write_text(json.dumps(document, indent=2, default=str) + "\n")
    m, g = meta["machine"], meta["git"]
    lines = [
        "# Pigeonhole real-time benchmark",
        "",
        f"- date: {document['date']} ({document['mode']} run)",
        f"- machine: {m['nproc']} CPUs ({m['cpu_model']}), {m['memory_gib']} GiB, "
        f"Linux {m['kernel']}, Python {m['python']}",
        f"- services: PostgreSQL {meta['services'].get('postgresql')}, "
        f"Redis {meta['services'].get('redis')}",
        f"- commit: {g['commit']} ({g['subject']})"
        + (
            f", {g['tracked_files_modified']} tracked files modified"
            if g["tracked_files_modified"]
            else ""
        ),
        "- client: one asyncio process on raw sockets, sharing the CPUs with daphne, smtpd, "
        "PostgreSQL and Redis",
        "",
        markdown_table(table),
        "",
    ]
    if quick:
        lines += ["Quick run: sizes are reduced; the targets are meant for the full sizes.", ""]
    lines += [cpu_table(results), ""]
    if "calls" in results:
        from tests.benchmarks.calls import markdown

        lines += [markdown(results["calls"]), ""]
    details = {
        name: {k: v for k, v in result.items() if k != "series"} for name, result in results.items()
    }
    lines += ["## Details", "", "```json", json.dumps(details, indent=2, default=str), "```", ""]
    md_path = RESULTS / "latest.md"
    md_path.write_text("\n".join(lines))
    return json_path, md_path
