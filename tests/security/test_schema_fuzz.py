"""Issue 11, matrix 4: schema-driven fuzzing of the live server.

Schemathesis (``st run``) reads ``/api/openapi.json`` from a real daphne process (so the paths
Channels serves — wait, stream, the outbox waits — are exercised too) and sends, with an admin
key, at least ``FUZZ_EXAMPLES`` generated requests to every operation (100 in ``make test``,
1,000 in ``make fuzz``): its examples, coverage (boundaries and negative values), fuzzing
(positive and negative data) and stateful phases, the last following the document's OpenAPI
links (create inbox → get/patch/delete/send/emails, create label → patch/delete, create
webhook → deliveries/test/patch, create key → patch/delete). Checks: not_a_server_error,
status_code_conformance, content_type_conformance, response_schema_conformance,
negative_data_rejection, ignored_auth, and ``error_envelope`` (``schema_hooks``): every error
body is ``{"error": {"code", "message", "issues"?}}``. The figure asserted: **0 failures** (and
0 errors), every operation tested at least ``FUZZ_EXAMPLES`` times.

The run's conditions, chosen so that it tests the API and nothing else:

- ``RATE_LIMIT_PER_MINUTE`` is raised to 1,000,000 for the web process: the fuzzer sends far
  more than the default 600 requests a minute with one key, and 429s would hide every other
  answer (the limit itself is matrix 8's subject).
- The web process runs under ``schema_server``'s network guard: no DNS query and no connection
  leaves 127.0.0.1, whatever webhook URL or recipient the fuzzer makes up; outbound mail goes
  to a local SMTP sink (``EMAIL_URL``).
- Before the run, the workspace gets an inbox with three emails (one with an attachment), a
  label, a webhook endpoint and one delivery, so operations on emails and deliveries meet real
  objects, not only 404s.

Figures are printed at the end of the test (run with ``-s`` to see them, ``make fuzz`` does).
"""

from __future__ import annotations

import json
import os
import re
import smtplib
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiosmtpd.controller import Controller

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from tests.live import ROOT, Stack, embedded, free_port
from tests.mail.messages import PNG, message
from tests.security.schema_hooks import envelope_problem

FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "100"))
CONFIG = Path(__file__).with_name("schema_fuzz.toml")
RATE_LIMIT_FOR_FUZZING = "1000000"
METHODS = {"get", "post", "put", "patch", "delete"}


# --- the envelope check itself must be able to fail --------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "body", "problem"),
    [
        ("", None, "Content-Type is missing"),
        ("text/html", None, "Content-Type is text/html"),
        ("application/json", {"detail": "x"}, "single key `error`"),
        ("application/json", {"error": "x"}, "`error` is not an object"),
        ("application/json", {"error": {"code": "x"}}, "`error.message`"),
        ("application/json", {"error": {"code": "", "message": "m"}}, "`error.code`"),
        ("application/json", {"error": {"code": "x", "message": "m", "hint": 1}}, "outside"),
        ("application/json", {"error": {"code": "validation_error", "message": "m"}}, "without"),
        ("application/json", {"error": {"code": "x", "message": "m", "issues": []}}, "non-empty"),
        (
            "application/json",
            {"error": {"code": "x", "message": "m", "issues": [{"path": "a"}]}},
            "An issue is not",
        ),
    ],
)
def test_envelope_check_catches(content_type: str, body: Any, problem: str) -> None:
    found = envelope_problem(400, content_type, body)
    assert found is not None and problem in found


def test_envelope_check_passes_the_envelope() -> None:
    body = {
        "error": {
            "code": "validation_error",
            "message": "m",
            "issues": [{"path": "a", "message": "b"}],
        }
    }
    assert envelope_problem(400, "application/json", body) is None
    assert (
        envelope_problem(404, "application/json", {"error": {"code": "x", "message": "m"}}) is None
    )


# --- the run -------------------------------------------------------------------------------------


class Sink:
    """Outbound mail relay on 127.0.0.1 that keeps a count of what it was handed."""

    def __init__(self) -> None:
        self.count = 0
        self.port = free_port()
        self.controller = Controller(self, hostname="127.0.0.1", port=self.port)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.count += 1
        return "250 OK"


@pytest.fixture
def fuzz_stack(transactional_db: None, tmp_path: Path) -> Iterator[tuple[Stack, Sink, Path]]:
    from django.db import connection

    sink = Sink()
    sink.controller.start()
    stack = Stack(connection.settings_dict["NAME"])
    stack.web.env.update(
        RATE_LIMIT_PER_MINUTE=RATE_LIMIT_FOR_FUZZING,
        EMAIL_URL=f"smtp://127.0.0.1:{sink.port}",
        GUARD_LOG=str(tmp_path / "guard.log"),
        LOG_LEVEL="ERROR",  # stderr then holds only what went wrong
    )
    if not embedded():  # embedded: tests.live runs `serve` under this guard already
        stack.web.argv = [
            sys.executable,
            "-m",
            "tests.security.schema_server",
            "-b",
            "127.0.0.1",
            "-p",
            str(stack.http_port),
            "--access-log",
            str(tmp_path / "access.log"),
            "config.asgi:application",
        ]
    stack.start()
    try:
        yield stack, sink, tmp_path
    finally:
        stack.stop()
        sink.controller.stop()


def _seed(stack: Stack, key: str) -> None:
    """Real objects for the operations that need them: emails (one with an attachment), a
    label, a webhook endpoint with one delivery."""
    with stack.client(key) as api:
        inbox = api.post("inboxes", json={"local_part": "seed"}).json()
        api.post("labels", json={"key": "seeded", "name": "Seeded"}).raise_for_status()
        hook = api.post("webhooks", json={"url": "https://hooks.example.invalid/in"}).json()
        api.post(f"webhooks/{hook['id']}/test").raise_for_status()
    raws = [
        message(to=inbox["address"], subject="Your code is 482913", text="Code: 482913"),
        message(to=inbox["address"], subject="Invoice", attachments=[("a.png", "image/png", PNG)]),
        message(
            to=inbox["address"],
            subject="Hello",
            html="<p>Hi <a href='https://x.test/v'>verify</a></p>",
        ),
    ]
    with smtplib.SMTP("127.0.0.1", stack.smtp_port, timeout=30) as smtp:
        for raw in raws:
            smtp.sendmail("sender@example.org", [inbox["address"]], raw)


def _operations(base_url: str) -> dict[str, str]:
    """Every operation of the live document: ``"METHOD /path"`` -> operationId."""
    document = httpx.get(f"{base_url}/api/openapi.json", timeout=30).json()
    return {
        f"{method.upper()} {path}": operation["operationId"]
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    }


def _cases_per_operation(ndjson: Path) -> tuple[Counter[str], Counter[str]]:
    """Test cases per operation (all phases, stateful steps included) and cases per phase."""
    per_operation: Counter[str] = Counter()
    per_phase: Counter[str] = Counter()
    with ndjson.open(encoding="utf-8") as lines:
        for line in lines:
            event = json.loads(line)
            finished = event.get("ScenarioFinished")
            if finished is None:
                continue
            cases = finished["recorder"].get("cases", {})
            per_phase[finished["phase"]] += len(cases)
            for case in cases.values():
                value = case["value"]
                per_operation[f"{value['method']} {value['path']}"] += 1
    return per_operation, per_phase


def _failures_text(output: str) -> str:
    start = output.find("=== FAILURES ===")
    start = output.find("\n", start) if start >= 0 else max(0, len(output) - 6000)
    return output[start : start + 12000]


class Run:
    """One ``st run`` and what its reports say."""

    def __init__(self, workdir: Path, name: str, env: dict[str, str], args: list[str]) -> None:
        reports = workdir / name
        command = [
            str(Path(sys.executable).with_name("st")),
            "--config-file",
            str(CONFIG),
            "run",
            *args,
            "--max-examples",
            str(FUZZ_EXAMPLES),
            "--generation-database",
            "none",
            "--report",
            "json,ndjson,junit",
            "--report-dir",
            str(reports),
            "--no-color",
        ]
        result = subprocess.run(
            command,
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=max(1200, FUZZ_EXAMPLES * 30),
        )
        self.returncode = result.returncode
        self.output = result.stdout + result.stderr
        (workdir / f"{name}.txt").write_text(self.output)
        self.report = json.loads(next(reports.glob("json-*.json")).read_text())
        self.per_operation, self.per_phase = _cases_per_operation(
            next(reports.glob("ndjson-*.ndjson"))
        )
        self.failures = sum(f["count"] for f in self.report["failures"])
        self.errors = sum(e["count"] for e in self.report["errors"])

    def problems(self) -> str:
        return _failures_text(self.output)


def test_schema_fuzz(
    fuzz_stack: tuple[Stack, Sink, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    stack, sink, workdir = fuzz_stack
    workspace = Workspace.objects.create(name="Fuzz")
    created = key_services.api_key_create(
        workspace=workspace, name="fuzz", scopes=["admin"], by=Actor.system("tests")
    )
    _seed(stack, created.plain)
    operations = _operations(stack.base_url)

    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "tests.security.schema_hooks",
        "PYTHONPATH": str(ROOT),
        "FUZZ_KEY_ID": created.key.pk,
    }
    target = [
        f"{stack.base_url}/api/openapi.json",
        "--header",
        f"Authorization: Bearer {created.plain}",
    ]
    started = time.monotonic()
    runs = [Run(workdir, "run", env, target)]
    per_operation = Counter(runs[0].per_operation)
    # Hypothesis sometimes ends an operation's generation early (it judged the inputs it could
    # still draw too alike); such operations get more fuzzing until each has its count.
    for round_number in range(1, 4):
        thin = [label for label in operations if per_operation[label] < FUZZ_EXAMPLES]
        if not thin:
            break
        only = [arg for label in thin for arg in ("--include-operation-id", operations[label])]
        runs.append(
            Run(workdir, f"top-up-{round_number}", env, [*target, *only, "--phases", "fuzzing"])
        )
        per_operation.update(runs[-1].per_operation)
    elapsed = time.monotonic() - started
    report = runs[0].report
    per_phase: Counter[str] = Counter()
    for run in runs:
        per_phase.update(run.per_phase)

    access_log = workdir / "access.log"
    calls = sum(1 for _ in access_log.open()) if access_log.exists() else 0
    guard_log = workdir / "guard.log"
    refused = sum(1 for _ in guard_log.open()) if guard_log.exists() else 0
    links = re.search(r"API Links:\s+(\d+) covered / (\d+) selected", runs[0].output)
    server_errors = [line for line in stack.web.logs if "Traceback" in line or " ERROR " in line]

    summary = (
        f"schema fuzz: {len(operations)} operations, {FUZZ_EXAMPLES} examples each requested, "
        f"{sum(run.report['test_cases']['generated'] for run in runs)} test cases generated "
        f"({', '.join(f'{k} {v}' for k, v in sorted(per_phase.items()))}), "
        f"fewest per operation {min(per_operation[op] for op in operations)}, "
        f"{calls} HTTP calls served, links {links.group(1) + '/' + links.group(2) if links else '?'} "
        f"covered, {sink.count} outbound mails to the sink, {refused} outside connections "
        f"refused by the guard, seed {report['seed']}, {len(runs) - 1} top-up runs, "
        f"{elapsed:.0f} s; failures {sum(run.failures for run in runs)}, errors "
        f"{sum(run.errors for run in runs)}"
    )
    with capsys.disabled():
        print(f"\n{summary}")

    for run in runs:
        assert run.failures == 0 and run.report["failures"] == [], f"{summary}\n{run.problems()}"
        assert run.errors == 0, f"{summary}\n{run.problems()}"
        assert run.returncode == 0, f"{summary}\n{run.problems()}"
    assert report["complete"] and report["operations"]["tested"] == len(operations), summary
    assert report["phases"]["stateful"]["status"] == "success", summary
    thin = {op: per_operation[op] for op in operations if per_operation[op] < FUZZ_EXAMPLES}
    assert not thin, f"operations with fewer than {FUZZ_EXAMPLES} test cases: {thin}"
    assert not server_errors, "\n".join(list(stack.web.logs)[-80:])  # with the tracebacks
