"""One table of every figure of the performance issue next to its target, from the results files
the benchmarks wrote (``python -m tests.benchmarks.summary``; ``make bench`` runs it last).

Reads ``results/{latest,ingest,scale,rest,webhooks,scaleout}.json``; a file that is missing (its
benchmark was not run) shows as "not measured". Writes ``results/summary.md`` and prints it.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from typing import Any

from tests.benchmarks.stack import RESULTS


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
    return lines


def rest_lines() -> list[Line]:
    document = _load("rest")
    if document is None:
        return _missing("REST", "python -m tests.benchmarks.rest")
    return [
        Line(
            "REST, 50 clients",
            f"`{name}`",
            f"{r['rate']:,.0f}/s, p99 {r['p99_ms']:.0f} ms",
            "measured (no target); N+1 by query-count tests",
            None,
        )
        for name, r in document.items()
    ]


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


def lines() -> list[Line]:
    return [
        *ingest_lines(),
        *scale_lines(),
        *realtime_lines(),
        *rest_lines(),
        *webhook_lines(),
        *scaleout_lines(),
    ]


def markdown(table: list[Line]) -> str:
    mark = {True: "yes", False: "**no**", None: "—"}
    out = [
        f"Performance summary, {time.strftime('%Y-%m-%d')} (from `tests/benchmarks/results/`)",
        "",
        "| area | figure | value | target | met |",
        "|---|---|---:|---:|:---:|",
    ]
    out += [f"| {x.area} | {x.figure} | {x.value} | {x.target} | {mark[x.met]} |" for x in table]
    missed = sum(1 for x in table if x.met is False)
    out += ["", f"{sum(1 for x in table if x.met)} targets met, {missed} not met."]
    return "\n".join(out)


def main() -> int:
    text = markdown(lines())
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "summary.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
