"""One table of every figure of the performance issue next to its target, from the results files
the benchmarks wrote (``python -m tests.benchmarks.summary``; ``make bench`` runs it last).

Reads ``results/{latest,ingest,scale,rest,webhooks,scaleout,lifecycle,startup}.json``; a file
that is missing (its benchmark was not run) shows as "not measured". Writes ``results/summary.md``
and prints it, and writes ``docs/benchmarks.md``: the page of figures, generated and never edited
by hand, with the commit, the date and the machine, the summary table and each benchmark's own
tables.

This is where ``make bench`` passes or fails: each benchmark before it reports its figures
against its targets and exits 0 whatever they are (so that one missed target does not leave the
rest unmeasured), and the summary exits 1 when any target of the table is missed
(``--report-only``: 0). It says per area whether the area has targets or only reports figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.benchmarks.stack import RESULTS

ROOT = Path(__file__).resolve().parents[2]
DOCS_PAGE = ROOT / "docs" / "benchmarks.md"
# Each benchmark's own report, in the order of the summary: (heading, results file).
DETAILS = [
    ("SMTP ingest", "ingest.md"),
    ("A million emails", "scale.md"),
    ("Real time", "latest.md"),
    ("REST", "rest.md"),
    ("Webhooks", "webhooks.md"),
    ("Scale-out", "scaleout.md"),
    ("Data lifecycle", "lifecycle.md"),
    ("Start-up", "startup.md"),
]


@dataclass(frozen=True)
class Line:
    area: str
    figure: str
    value: str
    target: str
    met: bool | None  # None: no target, or not measured


def _load(name: str) -> Any:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() and path.stat().st_size else None


def _missing(area: str, command: str) -> list[Line]:
    return [Line(area, f"not measured (`{command}`)", "—", "—", None)]


def realtime_lines() -> list[Line]:
    document = _load("latest")
    if document is None:
        return _missing("real time", "python -m tests.benchmarks")
    quick = " (quick run)" if document.get("mode") == "quick" else ""
    return [
        Line("real time" + quick, row["scenario"], row["figure"], row["target"], row["met"])
        for row in document["table"]
    ]


def ingest_lines() -> list[Line]:
    from tests.benchmarks.ingest import verdicts

    document = _load("ingest")
    if document is None:
        return _missing("SMTP ingest", "python -m tests.benchmarks.ingest --maildev")
    results = document["results"]
    targets = {
        "ours-1 ÷ bare-insert": "≥ 70 %",
        "ours-1 ÷ MailDev": "≥ 3×",
        "ours-2 ÷ ours-1": "≥ 1.3×",
        "ours-2 (stretch ≥ 900/s)": "≥ 900/s (stretch)",
    }
    lines = []
    for kind, name in [("simple 4 KB", "ours-1"), ("realistic 4 KB", "ours-1")]:
        r = results.get(name, {}).get(kind)
        if r:
            lines.append(Line("SMTP ingest", f"{name}, {kind}", f"{r['rate']:.0f}/s", "—", None))
    lines += [
        Line("SMTP ingest", f"{kind}: {figure}", value, targets.get(figure, "—"), met)
        for kind, figure, value, met in verdicts(results)
    ]
    lost = [
        f"{name}, {kind}: {r.get('acked_not_stored', 0)} acknowledged not stored, "
        f"{r.get('stored_not_acked', 0)} stored not acknowledged"
        for name, kinds in results.items()
        for kind, r in kinds.items()
        if r.get("acked_not_stored") or r.get("stored_not_acked")
    ]
    lines.append(
        Line(
            "SMTP ingest",
            "every acknowledged message stored, and no other",
            "; ".join(lost) or "yes",
            "yes",
            not lost,
        )
    )
    scaled = document.get("scaling")
    if scaled:
        shared = scaled["shapes"]["shared writer, 1 smtpd"]
        lines += [
            Line(
                "SMTP ingest",
                "2 smtpds ÷ 1: service CPU per message, shared writer "
                f"(1 smtpd: {shared['service_cpu_ms_per_msg']:.2f} ms)",
                f"{scaled['shared_ratio']:.2f}×",
                "≤ 1.15×",
                scaled["shared_ratio"] <= 1.15,
            ),
            Line(
                "SMTP ingest",
                "2 smtpds ÷ 1: service CPU per message, a writer per smtpd (the design before)",
                f"{scaled['process_ratio']:.2f}×",
                "—",
                None,
            ),
            Line(
                "SMTP ingest",
                "1 vs 2 smtpds: every acknowledged message stored, none more",
                "yes" if scaled["all_stored"] else "no",
                "all",
                scaled["all_stored"],
            ),
        ]
    return lines


def scale_lines() -> list[Line]:
    document = _load("scale")
    if document is None:
        return _missing("a million emails", "python -m tests.benchmarks.scale")
    sizes = document["sizes"]
    largest = max(sizes, key=int)
    lines = [
        Line(
            "a million emails",
            f"{int(largest):,} stored: `{q['path'].replace('/api/v1', '')}` p95",
            f"{q['p95_ms']:.1f} ms",
            "< 50 ms",
            q["p95_ms"] < 50,
        )
        for q in sizes[largest]["queries"]
    ]
    rates = [sizes[size]["ingest"]["rate"] for size in sorted(sizes, key=int)]
    if len(rates) >= 2 and rates[0]:
        change = rates[-1] / rates[0] - 1
        lines.append(
            Line(
                "a million emails",
                f"ingest at {int(largest):,} against {int(min(sizes, key=int)):,} stored",
                f"{change:+.0%}",
                "within ±15 %",
                abs(change) <= 0.15,
            )
        )
    block = sizes[largest]
    without = block.get("ingest_without_body_index")
    if without and without["rate"]:
        change = block["ingest"]["rate"] / without["rate"] - 1
        lines.append(
            Line(
                "a million emails",
                f"ingest at {int(largest):,} with the body's full-text index "
                f"({block['ingest']['rate']:.0f}/s) against without it ({without['rate']:.0f}/s)",
                f"{change:+.0%}",
                "within 10 %",
                change >= -0.10,
            )
        )
    return lines


def rest_lines() -> list[Line]:
    document = _load("rest")
    if document is None:
        return _missing("REST", "python -m tests.benchmarks.rest")
    lines = []
    for name, r in document.items():
        if "ours" not in r:  # a results file of the harness before the reference
            continue
        ours, reference = r["ours"], r["reference"]
        lines.append(
            Line(
                "REST, 50 clients",
                f"`{name}`: ours ÷ bare reference",
                f"{r['ratio']:.2f} ({ours['rate']:,.0f}/s against {reference['rate']:,.0f}/s; "
                f"web CPU {ours['web_cpu_ms']:.2f} / {reference['web_cpu_ms']:.2f} ms per "
                f"request; p99 {ours['p99_ms']:.0f} ms)",
                "≥ 0.35",
                r["met"],
            )
        )
        if "services_met" in r:  # results written before the target was checked have none
            lines.append(
                Line(
                    "REST, 50 clients",
                    f"`{name}`: PostgreSQL + Redis CPU per request, ours ÷ bare reference",
                    f"{r['services_ratio']} ({ours['pg_cpu_ms'] + ours['redis_cpu_ms']:.2f} "
                    f"against {reference['pg_cpu_ms'] + reference['redis_cpu_ms']:.2f} ms)",
                    "≤ 2",
                    r["services_met"],
                )
            )
    return lines or _missing("REST", "python -m tests.benchmarks.rest")


def webhook_lines() -> list[Line]:
    document = _load("webhooks")
    if document is None:
        return _missing("webhooks", "python -m tests.benchmarks.webhooks")
    return [
        Line("webhooks", f"deliveries/s, {name}", f"{r['per_second']}/s", "measured", None)
        for name, r in document.items()
    ]


def scaleout_lines() -> list[Line]:
    document = _load("scaleout")
    if document is None:
        return _missing("scale-out", "python -m tests.benchmarks.scaleout")
    lines = [
        Line(
            "scale-out",
            f"{name}: exactly once",
            "yes" if r["exactly_once"] else "no",
            "every message, event, delivery once",
            r["exactly_once"],
        )
        for name, r in document.items()
    ]
    rates = [r["ingest_rate"] for r in document.values()]
    if len(rates) == 2 and rates[0]:
        lines.append(
            Line(
                "scale-out",
                "ingest, 2 + 2 + 2 against 1 + 1 + 1",
                f"{rates[1] / rates[0]:.2f}×",
                "> 1× (throughput rises)",
                rates[1] > rates[0],
            )
        )
    return lines


def lifecycle_lines() -> list[Line]:
    document = _load("lifecycle")
    if document is None:
        return _missing("data lifecycle", "python -m tests.benchmarks.lifecycle")
    out = []
    purge = document.get("purge")
    if purge:
        size = f"purging {purge['emails']:,}"
        base, during = purge["without"]["rate"], purge["with"]["rate"]
        change = during / base - 1 if base else 0.0
        out += [
            Line(
                "data lifecycle",
                f"ingest while {size}",
                f"{change:+.0%}",
                "within 15 %",
                change >= -0.15,
            ),
            Line(
                "data lifecycle",
                f"longest lock wait while {size}",
                f"{1000 * purge['max_lock_wait_s']:.0f} ms",
                "< 1 s",
                purge["max_lock_wait_s"] < 1,
            ),
        ]
    export = document.get("export")
    if export:
        out.append(
            Line(
                "data lifecycle",
                f"web process peak memory exporting {export['emails']:,} emails",
                f"{export['web_hwm_after_mb']} MB (before: {export['web_hwm_before_mb']} MB)",
                "flat",
                None,
            )
        )
    return out or _missing("data lifecycle", "python -m tests.benchmarks.lifecycle")


def startup_lines() -> list[Line]:
    document = _load("startup")
    if document is None:
        return _missing("start-up", "python -m tests.benchmarks.startup")
    return [
        Line(
            "start-up",
            f"`{name}`: exec → serving, median of {len(r['runs_s'])}",
            f"{r['median_s']:.2f} s (CPU {statistics.median(r['cpu_s']):.2f} s)",
            "—" if r["target_s"] is None else f"≤ {r['target_s']:.1f} s",
            r["met"],
        )
        for name, r in document.items()
    ]


def lines() -> list[Line]:
    return [
        *ingest_lines(),
        *scale_lines(),
        *realtime_lines(),
        *rest_lines(),
        *webhook_lines(),
        *scaleout_lines(),
        *lifecycle_lines(),
        *startup_lines(),
    ]


def summary_table(table: list[Line]) -> list[str]:
    mark = {True: "yes", False: "**no**", None: "—"}
    out = ["| area | figure | value | target | met |", "|---|---|---:|---:|:---:|"]
    out += [f"| {x.area} | {x.figure} | {x.value} | {x.target} | {mark[x.met]} |" for x in table]
    missed = sum(1 for x in table if x.met is False)
    out += ["", f"{sum(1 for x in table if x.met)} targets met, {missed} not met."]
    targeted, reporting = verdict_areas(table)
    if targeted:
        out.append(
            f"Areas with targets (make bench fails when one is missed): {', '.join(targeted)}."
        )
    if reporting:
        out.append(
            f"Areas that only report their figures (no target to miss): {', '.join(reporting)}."
        )
    return out


def verdict_areas(table: list[Line]) -> tuple[list[str], list[str]]:
    """(the measured areas with at least one target, the measured areas with none)."""
    areas: dict[str, bool] = {}
    for line in table:
        if line.figure.startswith("not measured"):
            continue
        areas[line.area] = areas.get(line.area, False) or line.met is not None
    return [a for a, t in areas.items() if t], [a for a, t in areas.items() if not t]


def markdown(table: list[Line]) -> str:
    heading = f"Performance summary, {time.strftime('%Y-%m-%d')} (from `tests/benchmarks/results/`)"
    return "\n".join([heading, "", *summary_table(table)])


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def commit() -> str:
    """The short hash of HEAD, saying so when tracked files (other than this page) differ from it."""
    short = _git("rev-parse", "--short", "HEAD") or "unknown"
    changed = _git(
        "status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs/benchmarks.md"
    )
    return f"{short} (with uncommitted changes to tracked files)" if changed else short


def _proc_field(path: str, name: str) -> str:
    try:
        text = Path(path).read_text()
    except OSError:
        return ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == name:
            return value.strip()
    return ""


def machine() -> str:
    cpus = os.cpu_count() or 0
    model = _proc_field("/proc/cpuinfo", "model name") or "CPU model unknown"
    memory = _proc_field("/proc/meminfo", "MemTotal")  # "24576000 kB"
    text = f"{cpus} CPUs ({model})"
    if memory.endswith("kB"):
        text += f", {int(memory.split()[0]) / 1024**2:.1f} GiB of memory"
    return text


def _demoted(report: str) -> list[str]:
    """A benchmark's own report under this page's headings: its headings two levels down, and
    the raw JSON details that ``latest.md`` ends with left out."""
    out: list[str] = []
    fenced = False
    for line in report.rstrip("\n").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            if line.lstrip("#").strip() == "Details":
                break
            line = "##" + line
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return out


def page(table: list[Line]) -> str:
    out = [
        "<!-- Generated by `python -m tests.benchmarks.summary`, the last step of `make bench`."
        " Do not edit: run the benchmarks again. -->",
        "",
        "# Benchmarks",
        "",
        "This page is generated. `make bench` runs every benchmark against the Procfile's"
        " processes and then `python -m tests.benchmarks.summary`, which writes it from the"
        " results in `tests/benchmarks/results/`; a benchmark that did not run shows as"
        ' "not measured". Nobody edits the figures by hand: to change them, change the code'
        " and run `make bench` again, and commit this page with the change it measures. What"
        " each figure means and how it is measured is in"
        " [Benchmark methods](benchmark-methods.md).",
        "",
        f"- commit: {commit()}",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- machine: {machine()}; the load generator shares it with every process measured",
        "",
        "## Summary",
        "",
        *summary_table(table),
    ]
    for heading, name in DETAILS:
        path = RESULTS / name
        if path.exists() and path.stat().st_size:
            out += ["", f"## {heading}", "", *_demoted(path.read_text())]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.summary", description=__doc__)
    parser.add_argument("--report-only", action="store_true", help="exit 0 when a target is missed")
    args = parser.parse_args(argv)
    table = lines()
    text = markdown(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "summary.md").write_text(text + "\n")
    DOCS_PAGE.write_text(page(table))
    print(text)
    print(f"wrote {DOCS_PAGE.relative_to(ROOT)}")
    missed = [f"{x.area}: {x.figure}" for x in table if x.met is False]
    if missed and not args.report_only:
        print(f"bench: {len(missed)} targets missed; failing (--report-only to report only):")
        for line in missed:
            print(f"  {line}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
