"""SMTP ingest throughput: our receiver against bare references, in one run
(``python -m tests.benchmarks.ingest``; ``make bench`` runs it).

Three message kinds (a simple 4 KB text message, a realistic 4 KB multipart/alternative sign-up
mail, a realistic 64 KB message with a PDF attachment) go to each target over SMTP from an
asyncio load generator in this process: ``CLIENTS`` concurrent clients, a new connection per
message, open for as long as the run lasts. Targets, each as its own process(es) on 127.0.0.1:

- ``bare-parse``: aiosmtpd + the stdlib parser, nothing stored (``reference_smtpd``);
- ``bare-insert``: the same + one PostgreSQL INSERT per message;
- ``ours-1`` / ``ours-2``: one and two ``manage.py smtpd`` processes on one port (SO_REUSEPORT)
  with the full pipeline (parse, extract, rules, store, event) into a benchmark database;
- ``ours-1-starttls``: one ``manage.py smtpd`` with a certificate (``SMTP_TLS_CERT``, made for the
  run), every message sent after ``STARTTLS`` (a new TLS session per connection, as an MTA
  without session resumption does); realistic 4 KB only, side by side with ``ours-1``'s
  plaintext figure (the load generator's own TLS work runs on the same machine);
- ``maildev`` (``--maildev``): MailDev from the npm registry, installed under ``var/`` on demand.
- ``ours-1-auth-on`` / ``ours-1-auth-off``: one ``manage.py smtpd`` each, with and without the
  authentication checks (``MAIL_AUTH_CHECKS``), started together and measured in alternation (on,
  off, on, off …) on ``realistic 4 KB signed``: the realistic 4 KB message DKIM-signed for real
  (2048-bit RSA, by one of ``AUTH_DOMAINS`` sender domains) with SPF and DMARC records, all served
  by a nameserver of this process on 127.0.0.1 (``tests/dns_server.py``), which every target of
  the run uses (``DNS_RESOLVER``): no lookup leaves the machine. The figure is the ratio of the two.

Per target and kind: messages/s (median of ``--repeat`` runs), latency p50/p99 from the end of
DATA to the ``250``, the server processes' CPU per message and their peak memory (VmHWM), and
the CPU per message of the benchmark database's PostgreSQL backends.
Writes ``results/ingest.{json,md}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from pathlib import Path

from tests.benchmarks import database
from tests.benchmarks.clients import HOST, _reply
from tests.benchmarks.stack import (
    RESULTS,
    child_env,
    cpu_seconds,
    machine_busy_pct,
    postgres_cpu_seconds,
    rss_kb,
)
from tests.live import ROOT, Process, descendants, free_port

CLIENTS = 10
SENDER = "accounts@shop.example"
MAILDEV_DIR = ROOT / "var" / "maildev"


# --- messages ----------------------------------------------------------------------------------


def _filler(size: int, seed: int) -> str:
    words = [
        "account",
        "verify",
        "your",
        "email",
        "address",
        "please",
        "confirm",
        "the",
        "code",
        "below",
        "thank",
        "you",
        "team",
    ]
    rnd = random.Random(seed)
    out: list[str] = []
    length = 0
    while length < size:
        line = " ".join(rnd.choice(words) for _ in range(11))
        out.append(line)
        length += len(line) + 2
    return "\r\n".join(out)


def simple_4k(to: str, seq: int) -> bytes:
    return (
        f"From: Shop <{SENDER}>\r\nTo: {to}\r\nSubject: Your code is {seq % 1_000_000:06d}\r\n"
        f"Date: {formatdate()}\r\nMessage-ID: {make_msgid(domain='shop.example')}\r\n"
        "MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"
        f"Your verification code is {seq % 1_000_000:06d}.\r\n\r\n{_filler(3600, seq)}\r\n"
    ).encode()


def _realistic(to: str, seq: int, body_size: int) -> EmailMessage:
    code = f"{seq % 1_000_000:06d}"
    msg = EmailMessage()
    msg["From"] = f"Shop Accounts <{SENDER}>"
    msg["To"] = to
    msg["Subject"] = f"Confirm your email address — code {code}"
    msg["Date"] = formatdate()
    msg["Message-ID"] = make_msgid(domain="shop.example")
    msg["List-Unsubscribe"] = "<https://shop.example/unsubscribe?u=8c1f>"
    msg["DKIM-Signature"] = (
        "v=1; a=rsa-sha256; c=relaxed/relaxed; d=shop.example; s=s1; h=from:to:subject:date; "
        "bh=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=; b=" + "A" * 340
    )
    text = f"Hi,\n\nyour code is {code}.\nOr open https://shop.example/verify?t={seq:08x}\n\n"
    text += _filler(body_size // 3, seq).replace("\r\n", "\n")
    msg.set_content(text)
    html = (
        "<html><body><table><tr><td><p>Hi,</p>"
        f"<p>Your code is <strong>{code}</strong>.</p>"
        f'<p><a href="https://shop.example/verify?t={seq:08x}">Verify my email</a></p>'
        f"<p>{_filler(body_size // 2, seq + 1)}</p></td></tr></table></body></html>"
    )
    msg.add_alternative(html, subtype="html")
    return msg


def realistic_4k(to: str, seq: int) -> bytes:
    return _realistic(to, seq, 2400).as_bytes().replace(b"\n", b"\r\n")


def realistic_64k(to: str, seq: int) -> bytes:
    msg = _realistic(to, seq, 2400)
    rnd = random.Random(seq)
    pdf = b"%PDF-1.4\n" + rnd.randbytes(44_000) + b"\n%%EOF\n"
    msg.add_attachment(pdf, maintype="application", subtype="pdf", filename="invoice.pdf")
    return msg.as_bytes().replace(b"\n", b"\r\n")


KINDS: dict[str, Callable[[str, int], bytes]] = {
    "simple 4 KB": simple_4k,
    "realistic 4 KB": realistic_4k,
    "realistic 64 KB": realistic_64k,
}
BASE_KINDS = tuple(KINDS)

# --- signed mail for the authentication checks --------------------------------------------------

SIGNED = "realistic 4 KB signed"
AUTH_DOMAINS = 20  # sender domains the signed mail comes from (each: key, SPF, DMARC records)
_signing: dict[str, object] = {}


def _auth_dns() -> object:
    """The run's nameserver (tests/dns_server.py) with every sender domain's DKIM key, SPF
    record (127.0.0.1 may send) and DMARC policy; the key to sign with."""
    import base64

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    from tests.dns_server import DnsServer

    if "dns" in _signing:
        return _signing["dns"]
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _signing["pem"] = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    public = base64.b64encode(
        private.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    ).decode()
    server = DnsServer()
    for n in range(AUTH_DOMAINS):
        domain = f"shop{n}.example"
        server.publish(f"bench._domainkey.{domain}", f"v=DKIM1; k=rsa; p={public}")
        server.publish(domain, "v=spf1 ip4:127.0.0.1 -all")
        server.publish(f"_dmarc.{domain}", "v=DMARC1; p=reject; rua=mailto:d@shop.example")
    _signing["dns"] = server
    return server


def realistic_4k_signed(to: str, seq: int) -> bytes:
    """``realistic 4 KB`` from one of the ``AUTH_DOMAINS`` domains, DKIM-signed (relaxed)."""
    import dkim

    _auth_dns()
    domain = f"shop{seq % AUTH_DOMAINS}.example"
    msg = _realistic(to, seq, 2400)
    del msg["DKIM-Signature"]
    msg.replace_header("From", f"Shop Accounts <accounts@{domain}>")
    raw = msg.as_bytes().replace(b"\n", b"\r\n")
    signature = dkim.sign(
        raw, b"bench", domain.encode(), _signing["pem"], canonicalize=(b"relaxed", b"relaxed")
    )
    return signature + raw


KINDS[SIGNED] = realistic_4k_signed


# --- load --------------------------------------------------------------------------------------


async def _transaction(
    port: int, rcpt: str, message: bytes, tls: ssl.SSLContext | None = None, sender: str = SENDER
) -> float:
    """One message on a new connection (after STARTTLS with ``tls``); returns the seconds from
    the end of DATA to the 250."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        await _reply(reader, 220)
        writer.write(b"EHLO load.example\r\n")
        await _reply(reader, 250)
        if tls is not None:
            writer.write(b"STARTTLS\r\n")
            await _reply(reader, 220)
            await writer.start_tls(tls, server_hostname="localhost")
            writer.write(b"EHLO load.example\r\n")
            await _reply(reader, 250)
        if sender == "":  # the From header's domain (the signed kind's: SPF can pass)
            head = message[: message.find(b"\r\n\r\n")].decode("utf-8", "replace")
            sender = "bounce@" + head.split("\r\nFrom: ", 1)[1].split("@", 1)[1].split(">")[0]
        writer.write(f"MAIL FROM:<{sender}>\r\nRCPT TO:<{rcpt}>\r\nDATA\r\n".encode())
        await _reply(reader, 250)
        await _reply(reader, 250)
        await _reply(reader, 354)
        stuffed = message.replace(b"\r\n.", b"\r\n..")
        writer.write(stuffed + (b"" if stuffed.endswith(b"\r\n") else b"\r\n") + b".\r\n")
        await writer.drain()
        sent = time.perf_counter()
        await _reply(reader, 250)
        acked = time.perf_counter() - sent
        writer.write(b"QUIT\r\n")
        await writer.drain()
        return acked
    finally:
        writer.close()


async def load(
    port: int,
    messages: list[tuple[str, bytes]],
    clients: int,
    tls: ssl.SSLContext | None = None,
    sender: str = SENDER,
) -> dict:
    queue: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue()
    for item in messages:
        queue.put_nowait(item)
    latencies: list[float] = []
    errors: list[str] = []

    async def client() -> None:
        while not queue.empty():
            rcpt, raw = queue.get_nowait()
            try:
                latencies.append(await _transaction(port, rcpt, raw, tls, sender))
            except Exception as exc:  # counted, never hidden
                errors.append(f"{type(exc).__name__}: {exc}"[:200])

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.perf_counter() - started
    ordered = sorted(latencies) or [0.0]
    return {
        "messages": len(messages),
        "ok": len(latencies),
        "errors": len(errors),
        "first_errors": errors[:3],
        "wall_s": round(wall, 3),
        "rate": round(len(latencies) / wall, 1),
        "p50_ms": round(1000 * ordered[len(ordered) // 2], 2),
        "p99_ms": round(1000 * ordered[max(0, int(len(ordered) * 0.99) - 1)], 2),
    }


# --- targets -----------------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    port: int
    procs: list[Process] = field(default_factory=list)
    recipients: list[str] = field(default_factory=lambda: ["anyone@bench.example"])
    tls: ssl.SSLContext | None = None  # the client's context: every message after STARTTLS
    kinds: tuple[str, ...] = BASE_KINDS
    sender: str = SENDER  # MAIL FROM

    @property
    def pids(self) -> list[int]:
        """The target's processes and their children (an smtpd's writer process)."""
        own = [p.proc.pid for p in self.procs if p.proc is not None]
        return [pid for parent in own for pid in (parent, *descendants(parent))]

    def start(self) -> Target:
        for proc in self.procs:
            proc.start() if proc is self.procs[0] else _start_shared(proc)
        return self

    def stop(self) -> None:
        for proc in self.procs:
            proc.stop()


def _start_shared(proc: Process) -> None:
    """Starts a second process on a port that is already open (SO_REUSEPORT): waits a moment
    for it to bind, since the port answers already."""
    proc.proc = subprocess.Popen(
        proc.argv, cwd=ROOT, env=proc.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    time.sleep(3)
    if proc.proc.poll() is not None:
        raise RuntimeError(f"{proc.argv} exited with {proc.proc.returncode}")


def _reference(mode: str, env: dict[str, str], dsn: str) -> Target:
    port = free_port()
    argv = [sys.executable, "-m", "tests.benchmarks.reference_smtpd", "--port", str(port)]
    argv += ["--mode", mode, "--dsn", dsn]
    return Target(f"bare-{mode}", port, [Process(argv, port, env)])


def _ours(count: int, env: dict[str, str], recipients: list[str]) -> Target:
    port = free_port()
    argv = [sys.executable, "manage.py", "smtpd", "--host", "127.0.0.1", "--port", str(port)]
    return Target(
        f"ours-{count}", port, [Process(argv, port, env) for _ in range(count)], recipients
    )


def _ours_starttls(env: dict[str, str], recipients: list[str], directory: Path) -> Target:
    """``ours-1`` with a certificate, every message sent over STARTTLS."""
    from mail.smtpd.tls import self_signed

    cert, key = self_signed(directory, "localhost")
    tls_env = {**env, "SMTP_TLS_CERT": str(cert), "SMTP_TLS_KEY": str(key)}
    client = ssl.create_default_context(cafile=str(cert))
    port = free_port()
    argv = [sys.executable, "manage.py", "smtpd", "--host", "127.0.0.1", "--port", str(port)]
    return Target(
        "ours-1-starttls",
        port,
        [Process(argv, port, tls_env)],
        recipients,
        tls=client,
        kinds=("realistic 4 KB",),
    )


def _maildev(env: dict[str, str]) -> Target | None:
    entry = MAILDEV_DIR / "node_modules" / "maildev" / "bin" / "maildev"
    if not entry.exists():
        npm = shutil.which("npm")
        if npm is None:
            return None
        MAILDEV_DIR.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [
                npm,
                "install",
                "--silent",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(MAILDEV_DIR),
                "maildev@2",
            ],
            capture_output=True,
            timeout=600,
        )
        if done.returncode != 0 or not entry.exists():
            return None
    port, web = free_port(), free_port()
    argv = [
        "node",
        str(entry),
        "--smtp",
        str(port),
        "--web",
        str(web),
        "--ip",
        "127.0.0.1",
        "--silent",
    ]
    return Target("maildev", port, [Process(argv, port, env)])


def _run_once(target: Target, kind: str, count: int, warmup: int, run: int) -> dict:
    """One measured run of ``count`` messages (after ``warmup`` unmeasured ones)."""
    make = KINDS[kind]
    batch = [
        (rcpt := random.choice(target.recipients), make(rcpt, run * 1_000_000 + i))
        for i in range(warmup + count)
    ]
    asyncio.run(load(target.port, batch[:warmup], CLIENTS, target.tls, target.sender))
    cpu_before = sum(cpu_seconds(pid) for pid in target.pids)
    postgres_before = postgres_cpu_seconds(database.BENCH_DB)
    harness_before = time.process_time()
    dns = _signing.get("dns")
    queries_before = len(dns.queries) if dns is not None else 0  # type: ignore[attr-defined]
    result = asyncio.run(load(target.port, batch[warmup:], CLIENTS, target.tls, target.sender))
    used = sum(cpu_seconds(pid) for pid in target.pids) - cpu_before
    result["server_cpu_ms_per_msg"] = round(1000 * used / max(1, result["ok"]), 3)
    # The backends of the benchmark database (the targets' connections live for the run).
    postgres = postgres_cpu_seconds(database.BENCH_DB) - postgres_before
    result["postgres_cpu_ms_per_msg"] = round(1000 * postgres / max(1, result["ok"]), 3)
    result["harness_cpu_ms_per_msg"] = round(
        1000 * (time.process_time() - harness_before) / max(1, result["ok"]), 3
    )
    if dns is not None:
        asked = len(dns.queries) - queries_before  # type: ignore[attr-defined]
        result["dns_queries_per_msg"] = round(asked / max(1, result["ok"]), 3)
    return result


def _summary(target: Target, kind: str, runs: list[dict]) -> dict:
    best = sorted(runs, key=lambda r: r["rate"])[len(runs) // 2]
    return {
        **best,
        "rates": [r["rate"] for r in runs],
        "rate": statistics.median(r["rate"] for r in runs),
        "errors": sum(r["errors"] for r in runs),
        "peak_rss_kb": [rss_kb(pid, "VmHWM") for pid in target.pids],
        "size_bytes": len(KINDS[kind]("x@bench.example", 1)),
    }


def measure(target: Target, kind: str, count: int, repeat: int, warmup: int) -> dict:
    runs = [_run_once(target, kind, count, warmup, run) for run in range(repeat)]
    return _summary(target, kind, runs)


def _auth_pair(env: dict[str, str], recipients: list[str]) -> tuple[Target, Target]:
    """``ours-1`` with the authentication checks on and off, for :func:`measure_pair`."""
    pair = []
    for name, checks in (("ours-1-auth-on", "true"), ("ours-1-auth-off", "false")):
        port = free_port()
        argv = [sys.executable, "manage.py", "smtpd", "--host", "127.0.0.1", "--port", str(port)]
        process = Process(argv, port, {**env, "MAIL_AUTH_CHECKS": checks})
        pair.append(Target(name, port, [process], recipients, kinds=(SIGNED,), sender=""))
    return pair[0], pair[1]


def measure_pair(
    a: Target, b: Target, kind: str, count: int, repeat: int, warmup: int
) -> tuple[dict, dict]:
    """Two targets running at once, measured in alternation (a, b, a, b …), so that a change
    of load on the machine falls on both alike."""
    runs: tuple[list[dict], list[dict]] = ([], [])
    for run in range(repeat):
        for target, found in zip((a, b), runs, strict=True):
            found.append(_run_once(target, kind, count, warmup, run))
    return _summary(a, kind, runs[0]), _summary(b, kind, runs[1])


# --- report ------------------------------------------------------------------------------------


def verdicts(results: dict[str, dict[str, dict]]) -> list[tuple[str, str, str, bool | None]]:
    rows: list[tuple[str, str, str, bool | None]] = []
    for kind in KINDS:

        def rate(name: str, kind: str = kind) -> float | None:
            return results.get(name, {}).get(kind, {}).get("rate")

        ours1, ours2, insert, maildev = (
            rate("ours-1"),
            rate("ours-2"),
            rate("bare-insert"),
            rate("maildev"),
        )
        if ours1 and insert:
            rows.append(
                (kind, "ours-1 ÷ bare-insert", f"{ours1 / insert:.0%}", ours1 >= 0.7 * insert)
            )
        if ours1 and maildev:
            rows.append((kind, "ours-1 ÷ MailDev", f"{ours1 / maildev:.1f}×", ours1 >= 3 * maildev))
        elif ours1:
            rows.append((kind, "ours-1 ÷ MailDev", "not measured", None))
        if ours1 and ours2:
            rows.append((kind, "ours-2 ÷ ours-1", f"{ours2 / ours1:.2f}×", ours2 >= 1.3 * ours1))
        starttls = rate("ours-1-starttls")
        if starttls and ours1:
            rows.append(
                (kind, "ours-1-starttls ÷ ours-1 (plaintext)", f"{starttls / ours1:.0%}", None)
            )
        on, off = rate("ours-1-auth-on"), rate("ours-1-auth-off")
        if on and off:
            cpu = [
                results[name][kind]["server_cpu_ms_per_msg"]
                for name in ("ours-1-auth-on", "ours-1-auth-off")
            ]
            rows.append((kind, "auth checks on ÷ off (msgs/s)", f"{on / off:.0%}", None))
            rows.append(
                (
                    kind,
                    "auth checks on ÷ off (server CPU/msg)",
                    f"{cpu[0] / max(cpu[1], 1e-9):.2f}×",
                    None,
                )
            )
        if kind == "realistic 4 KB" and ours2:
            rows.append((kind, "ours-2 (stretch ≥ 900/s)", f"{ours2:.0f}/s", ours2 >= 900))
    return rows


def markdown(results: dict[str, dict[str, dict]], meta: dict) -> str:
    lines = [
        f"SMTP ingest, {meta['date']}, {CLIENTS} clients, a new connection per message, "
        f"median of {meta['repeat']} runs of {meta['count']} messages "
        f"(machine {meta['busy_before']:.0f}% busy before).",
        "",
        "| target | message | msgs/s | runs | p50 | p99 | server CPU/msg | PostgreSQL CPU/msg "
        "| peak RSS | errors |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, kinds in results.items():
        for kind, r in kinds.items():
            rss = " + ".join(f"{kb / 1024:.0f}" for kb in r["peak_rss_kb"])
            lines.append(
                f"| {name} | {kind} | {r['rate']:,.0f} | {', '.join(f'{x:.0f}' for x in r['rates'])} "
                f"| {r['p50_ms']:.1f} ms | {r['p99_ms']:.1f} ms | {r['server_cpu_ms_per_msg']:.2f} ms "
                f"| {r['postgres_cpu_ms_per_msg']:.2f} ms | {rss} MiB | {r['errors']} |"
            )
    lines += ["", "| message | figure | value | target met |", "|---|---|---:|:---:|"]
    for kind, figure, value, met in verdicts(results):
        mark = "—" if met is None else ("yes" if met else "**no**")
        lines.append(f"| {kind} | {figure} | {value} | {mark} |")
    return "\n".join(lines)


def log(text: str) -> None:
    print(f"[ingest {time.strftime('%H:%M:%S')}] {text}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="300 messages, one run")
    parser.add_argument("--messages", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=0)
    parser.add_argument("--maildev", action="store_true", help="also measure MailDev (npm)")
    parser.add_argument("--only", action="append", help="target name (repeatable)")
    args = parser.parse_args(argv)
    count = args.messages or (300 if args.quick else 1500)
    repeat = args.repeat or (1 if args.quick else 3)
    base_url = os.environ.get("DATABASE_URL") or database.DEFAULT_DATABASE_URL
    redis_url = os.environ.get("REDIS_URL") or database.DEFAULT_REDIS_URL
    bench_url = database.with_database(base_url, database.BENCH_DB)
    env = child_env(bench_url, redis_url)
    env["CELERY_TASK_ALWAYS_EAGER"] = "false"
    # Every target's authentication lookups go to the run's own nameserver (started below).
    log(f"database {database.BENCH_DB}: drop, create, migrate")
    database.recreate(base_url)
    results: dict[str, dict[str, dict]] = {}
    scratch = tempfile.mkdtemp(prefix="pgh-bench-tls-")
    try:
        database.migrate(env)
        database.setup_django(bench_url, redis_url, env["RATE_LIMIT_PER_MINUTE"])
        fixtures = database.create_fixtures(100)
        recipients = [address for _, address in fixtures.inboxes]
        env["DNS_RESOLVER"] = _auth_dns().address  # type: ignore[attr-defined]
        plans: list[Callable[[], Target | None]] = [
            lambda: _reference("parse", env, bench_url),
            lambda: _reference("insert", env, bench_url),
            lambda: _ours(1, env, recipients),
            lambda: _ours(2, env, recipients),
            lambda: _ours_starttls(env, recipients, Path(scratch)),
        ]
        if args.maildev:
            plans.append(lambda: _maildev(env))
        for plan in plans:
            target = plan()
            if target is None:
                log("MailDev could not be installed from the npm registry; not measured")
                continue
            if args.only and target.name not in args.only:
                continue
            target.start()
            try:
                results[target.name] = {}
                for kind in target.kinds:
                    size = count if "64" not in kind else max(100, count // 3)
                    busy = machine_busy_pct(1.0)
                    results[target.name][kind] = measure(target, kind, size, repeat, warmup=30)
                    r = results[target.name][kind]
                    log(
                        f"{target.name:12} {kind:16} {r['rate']:8.1f}/s runs {r['rates']} "
                        f"p99 {r['p99_ms']} ms, cpu {r['server_cpu_ms_per_msg']} ms/msg "
                        f"(PostgreSQL {r['postgres_cpu_ms_per_msg']} ms/msg), "
                        f"errors {r['errors']} (machine {busy:.0f}% busy before)"
                    )
            finally:
                target.stop()
        if not args.only or "ours-1-auth" in args.only:
            on, off = _auth_pair(env, recipients)
            on.start()
            off.start()
            try:
                busy = machine_busy_pct(1.0)
                found = measure_pair(on, off, SIGNED, count, max(repeat, 2), warmup=30)
                for target, r in zip((on, off), found, strict=True):
                    results[target.name] = {SIGNED: r}
                    log(
                        f"{target.name:15} {SIGNED:22} {r['rate']:8.1f}/s runs {r['rates']} "
                        f"p50 {r['p50_ms']} ms p99 {r['p99_ms']} ms, cpu "
                        f"{r['server_cpu_ms_per_msg']} ms/msg, dns "
                        f"{r.get('dns_queries_per_msg')} queries/msg, errors {r['errors']} "
                        f"(machine {busy:.0f}% busy before)"
                    )
            finally:
                on.stop()
                off.stop()
    finally:
        from django.db import connections

        connections.close_all()
        database.drop(base_url)
        shutil.rmtree(scratch, ignore_errors=True)
    meta = {
        "date": time.strftime("%Y-%m-%d"),
        "count": count,
        "repeat": repeat,
        "clients": CLIENTS,
        "busy_before": machine_busy_pct(1.0),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "ingest.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    text = markdown(results, meta)
    (RESULTS / "ingest.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
