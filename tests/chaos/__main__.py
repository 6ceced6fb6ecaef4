"""The large size of the fault scenarios (``make chaos``): ``python -m tests.chaos``.

Runs against a database of its own (``chaos_<name of DATABASE_URL's database>``: dropped,
created, migrated; helpers sharing a server do not collide) and prints the figures docs/faults.md
reports. Built so far: scenario 1 (acknowledged mail survives smtpd crashes), scenario 2 (``250``
only after commit), scenario 3 (webhooks at least once, never twice at once, under worker
kills), scenario 4 (retry schedule fidelity), scenario 5 (approval is a hard gate under worker
kills) and scenario 6 (real time without gaps across web restarts). ``--only 3 4`` runs some.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from urllib.parse import urlsplit

import psycopg
from psycopg import sql

from tests.benchmarks.database import DEFAULT_DATABASE_URL, DEFAULT_REDIS_URL, with_database
from tests.live import ROOT

DB = "pigeonhole_chaos"
SCENARIOS = ("1", "2", "3", "4", "5", "6")


def _recreate(base: str, create: bool) -> None:
    with psycopg.connect(with_database(base, "postgres"), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB)))
        if create:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--duration", type=float, default=120.0)
    parser.add_argument("--fault-attempts", type=int, default=1000)
    parser.add_argument(
        "--approval-sends", type=int, default=1000, help="per kind (key, workspace)"
    )
    parser.add_argument("--wait-trials", type=int, default=1000)
    parser.add_argument("--stream-events", type=int, default=1000)
    parser.add_argument("--webhook-events", type=int, default=2000)
    parser.add_argument(
        "--retry-deliveries", type=int, default=200, help="always-failing ones (scenario 4)"
    )
    parser.add_argument("--only", nargs="+", choices=SCENARIOS, default=SCENARIOS)
    args = parser.parse_args(argv)
    base = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    global DB
    DB = f"chaos_{urlsplit(base).path.lstrip('/') or 'pigeonhole'}"
    only = set(args.only)
    ok = True
    os.environ.update(
        DATABASE_URL=with_database(base, DB),
        REDIS_URL=os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL,
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    _recreate(base, create=True)
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)
        import django

        django.setup()
        from apikeys.services import workspace_get_or_create
        from inboxes.services import inbox_create
        from tests.chaos import commit_faults, smtp_crash

        workspace = workspace_get_or_create(name="chaos")
        if "1" in only:
            addresses = [
                inbox_create(workspace=workspace, local_part=f"chaos{n}", ttl_minutes=None).address
                for n in range(20)
            ]
            started = time.monotonic()
            figures = smtp_crash.run(
                DB, addresses, messages=args.messages, duration_s=args.duration, limit_s=1800
            )
            report = {k: v for k, v in figures.__dict__.items() if k != "details"}
            report["seconds"] = round(time.monotonic() - started, 1)
            print(json.dumps({"scenario 1: acknowledged mail survives crashes": report}, indent=2))
            for line in figures.details[:20]:
                print(line)
            ok = ok and figures.lost == figures.duplicates == figures.hash_mismatches == 0
        if "2" in only:
            faults_inbox = inbox_create(workspace=workspace, local_part="faults", ttl_minutes=None)
            for result in commit_faults.run(
                DB, faults_inbox.pk, faults_inbox.address, attempts=args.fault_attempts
            ):
                print(json.dumps({f"scenario 2: fault in the {result.fault}": result.__dict__}))
                ok = ok and (
                    result.answered_4xx == result.attempts
                    and not any(result.leftover_rows.values())
                    and result.counters == (0, 0)
                    and result.stored_after_retry == 1
                )
        if "3" in only:
            ok = _webhook_kills(args.webhook_events) and ok
        if "4" in only:
            ok = _retry_fidelity(args.retry_deliveries) and ok
        if "5" in only:
            ok = _approval_gate(args.approval_sends) and ok
        if "6" in only:
            ok = _realtime(args.wait_trials, args.stream_events) and ok
    finally:
        from django.db import connections

        connections.close_all()
        _recreate(base, create=False)
    return 0 if ok else 1


def _webhook_kills(events: int) -> bool:
    from tests.chaos import webhook_kills

    figures = webhook_kills.run(DB, events=events, min_kills=10)
    report = {k: v for k, v in figures.__dict__.items() if k != "details"}
    print(json.dumps({"scenario 3: webhooks at least once, never twice at once": report}, indent=2))
    for line in figures.details[:20]:
        print(line)
    return (
        figures.deliveries == events
        and figures.lost == figures.overlaps == figures.unlogged_requests == 0
        and figures.pending_at_end == 0
        and not figures.pending_after_30s  # None: drained within 30 s
        and figures.statuses == {"succeeded": events}
        and figures.second_2xx <= figures.interrupted_attempts <= figures.kills
    )


def _retry_fidelity(failing: int) -> bool:
    from tests.chaos import retry_fidelity

    slow, redirected = max(2, failing // 20), max(5, failing // 4)
    figures = retry_fidelity.run(DB, failing=failing, slow=slow, redirected=redirected)
    report = {k: v for k, v in figures.__dict__.items() if k != "details"}
    print(json.dumps({"scenario 4: retry schedule fidelity": report}, indent=2))
    for line in figures.details[:20]:
        print(line)
    attempts = len(retry_fidelity.SCHEDULE) + 1
    return (
        figures.attempts == {attempts: failing}
        and figures.requests_seen == attempts * failing
        and figures.early_claims == figures.late_claims == figures.gaps_out_of_band == 0
        and figures.wrong_final == 0
        and figures.timeouts_logged == figures.timeouts_in_band == 2 * slow
        and figures.redirect_attempts == figures.redirect_failures_logged == attempts * redirected
        and figures.redirect_target_hits == 0
    )


def _approval_gate(per_kind: int) -> bool:
    from tests.chaos import approval_gate

    gate = approval_gate.run(DB, per_kind=per_kind)
    report = {k: v for k, v in gate.__dict__.items() if k != "details"}
    print(json.dumps({"scenario 5: approval is a hard gate": report}, indent=2))
    for line in gate.details[:20]:
        print(line)
    approved = gate.fates.get("approve", 0)
    return (
        gate.held_while_pending == gate.swept_while_pending == gate.leaked == gate.early == 0
        and gate.approve_200 == gate.delivered_once + gate.delivered_again == approved
        and gate.explained_duplicates <= gate.interrupted_handovers <= gate.kills
        and gate.approve_409 == approved * (approval_gate.APPROVERS - 1)
        and gate.late_409 == gate.late_decisions
        and gate.missing == gate.duplicates == gate.content_mismatches == gate.wrong_status == 0
    )


def _realtime(trials: int, events: int) -> bool:
    import dataclasses

    from tests.chaos import realtime_gaps

    figures = realtime_gaps.run(DB, trials=trials, events=events)
    for name, part in (("waiters", figures.waiters), ("stream", figures.stream)):
        report = {k: v for k, v in dataclasses.asdict(part).items() if k != "details"}
        print(json.dumps({f"scenario 6: {name}": report}, indent=2, default=sorted))
        for line in part.details[:20]:
            print(line)
    waiters, stream = figures.waiters, figures.stream
    return (
        waiters.within_1s >= 0.999 * waiters.trials
        and stream.received == stream.logged == stream.events
        and stream.missing == stream.duplicates == stream.out_of_order == 0
        and stream.wrong_payload == 0
    )


if __name__ == "__main__":
    sys.exit(main())
