"""The three scenarios of the "Real time" issue, each against a fresh web process.

(a) **wait**: N waiters, each long-polling its own inbox (``/wait?timeout=120``, re-parking after
    every answer); mail arrives over SMTP at a fixed rate (open loop, a new connection per
    message) to a random parked waiter. Per message: the time from the DATA ``250`` to the
    waiter's complete response. A waiter is only chosen when its request was sent at least
    ``GRACE_S`` ago, no more than ``STALE_S`` ago (its wait of 120 s could end before the
    message is stored), and Redis shows its inbox group subscribed, so a message never lands
    between two waits (``wait`` without ``since`` would rightly not return it). A message its waiter
    does not answer within 15 s of the last send is a miss: it counts in the percentiles as
    slower than every answer, so the p99 target cannot be met by dropping it.
(b) **fan-out**: N SSE streams on one inbox, then one message: the time from the ``250`` until
    the last stream has read its ``email.received`` frame; repeated, a second apart.
(c) **idle streams**: N SSE streams spread over the inboxes, held by one web process: its VmRSS
    before (after a warm-up) and after they are all open.
(t) **wait with ``to`` filters** (issue 28): (a)'s measurement with ``waiters`` waiters all on
    ONE shared inbox, each waiting for its own plus tag (``/wait?to=bench-fanout+wNNNN@…``), as
    parallel CI runs sharing an inbox do: every message wakes every waiter of the inbox, and
    only the one whose tag it carries answers. 250 → that waiter's response.
(m) **MCP wait**: (a) with ``mcp_sessions`` waiters of each of three kinds, all parked on the
    same web process: the REST wait through the bench's bare HTTP client, the REST wait through
    our own async client (``pigeonhole_client``, httpx) and MCP sessions (the official client)
    calling ``wait_for_email``; the messages take turns between the kinds: 250 → answer of
    each, measured in the same seconds, the client libraries' own share of it, and the web
    process's VmRSS per parked waiter of each. MCP is judged against the REST wait through our
    client: each protocol through its client library.

Every timestamp comes from this process's event loop, which runs on the same cores as the
server; the CPU the harness used is reported with each scenario.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import math
import os
import random
import statistics
import sys
import time
import urllib.parse
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from redis import asyncio as aioredis

from tests.benchmarks.clients import (
    HttpConnection,
    SseStream,
    bench_message,
    close_all,
    smtp_send,
)
from tests.benchmarks.database import BENCH_DB, Fixtures
from tests.benchmarks.stack import RESULTS, BenchStack, CpuWindow, Profiler, rss_kb
from tests.live import ROOT

SENDER = "shop@bench.example"
RECEIVED_MARKER = b"event: email.received"
GRACE_S = 2.0  # a waiter is eligible for mail this long after its request went out
STALE_S = 110.0  # ... and until this long after it: its wait times out at 120 s
SETTLE_S = 2.0


@dataclass(frozen=True)
class Sizes:
    waiters: int
    messages: int  # measured messages of (a)
    warmup: int  # messages of (a) sent first and not measured
    rate: float  # messages per second in (a)
    fanout_streams: int
    fanout_repeats: int
    idle_streams: int
    connect_concurrency: int = 100  # connections being opened at once (listen backlog)
    mcp_sessions: int = 200  # (m): waiters of each kind, all parked at once
    mcp_messages: int = 1000  # (m): measured messages of each kind, taking turns


FULL = Sizes(
    waiters=1000,
    messages=400,
    warmup=20,
    rate=20.0,
    fanout_streams=1000,
    fanout_repeats=5,
    idle_streams=5000,
)
QUICK = Sizes(
    waiters=100,
    messages=50,
    warmup=5,
    rate=20.0,
    fanout_streams=100,
    fanout_repeats=5,
    idle_streams=500,
    mcp_sessions=50,
    mcp_messages=40,
)


@dataclass
class Context:
    stack: BenchStack
    fixtures: Fixtures
    redis_url: str
    sizes: Sizes
    database_url: str = ""  # the bench database, for its statistics
    profile: str = ""  # "", "cpu" or "wall" (py-spy with --idle)
    harness_pid: int = field(default_factory=os.getpid)

    def cpu_window(self) -> CpuWindow:
        return CpuWindow(
            {"web": self.stack.web.pid, "smtpd": self.stack.smtp.pid, "harness": self.harness_pid},
            BENCH_DB,
            self.database_url,
        )

    def profilers(self, scenario: str) -> list[Profiler]:
        if not self.profile:
            return []
        return [
            Profiler(
                pid,
                RESULTS / f"profile-{scenario}-{name}-{self.profile}.txt",
                idle=self.profile == "wall",
            )
            for name, pid in (("web", self.stack.web.pid), ("smtpd", self.stack.smtp.pid))
        ]


def percentile(values: Iterable[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty collection."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


async def _open_all(
    streams: list[SseStream], concurrency: int
) -> tuple[list[SseStream], Counter[str], float]:
    """Opens the streams, ``concurrency`` at a time; returns the open ones, failures, seconds."""
    gate = asyncio.Semaphore(concurrency)
    failures: Counter[str] = Counter()

    async def one(stream: SseStream) -> bool:
        async with gate:
            try:
                await stream.open()
                return True
            except Exception as exc:
                failures[type(exc).__name__ + (f" {stream.status}" if stream.status else "")] += 1
                stream.close()
                return False

    started = time.perf_counter()
    ok = await asyncio.gather(*(one(s) for s in streams))
    opened = [s for s, good in zip(streams, ok, strict=True) if good]
    return opened, failures, time.perf_counter() - started


def _stop_profilers(profilers: list[Profiler]) -> list[str]:
    return [str(p.stop().relative_to(ROOT)) for p in profilers]


# --- (a) wait ---------------------------------------------------------------------------------


@dataclass(eq=False)
class _Sample:
    seq: int
    inbox_id: str
    warmup: bool
    acked: float | None = None
    email_id: str | None = None
    received: float | None = None
    received_id: str | None = None
    headers_at: float | None = None  # client libraries only: the response headers' arrival
    error: str | None = None

    @property
    def complete(self) -> bool:
        return self.error is not None or (self.acked is not None and self.received is not None)


@dataclass(eq=False)
class _Waiter:
    inbox_id: str
    address: str
    group: str
    parked_at: float = 0.0  # when the pending wait request went out; 0 while not waiting
    sample: _Sample | None = None
    headers_at: float = 0.0  # when the pending answer's response headers reached the client

    async def headers_arrived(self, response: object) -> None:
        """An httpx response hook: the client library has the answer's status and headers;
        what follows until the sample ends is the client library's work (reading the body,
        parsing, validating) and the turns of this process's event loop it waits for."""
        self.headers_at = time.perf_counter()


def _answered(waiter: _Waiter, now: float, email_id: str, counters: Counter[str]) -> None:
    """A waiter's answer carried an email: the end of its sample's measurement."""
    sample, waiter.sample = waiter.sample, None
    if sample is None:
        counters["unexpected_200"] += 1
        return
    sample.received, sample.received_id = now, email_id
    if waiter.headers_at:
        sample.headers_at, waiter.headers_at = waiter.headers_at, 0.0


# One waiter's loop: park, record the answer, park again, until cancelled.
WaiterLoop = Callable[[Context, _Waiter, Counter[str], asyncio.Semaphore], Awaitable[None]]


def eligible(waiter: _Waiter, now: float) -> bool:
    """Whether mail may be sent to ``waiter`` at ``now``: it holds no sample and its wait went out
    at least ``GRACE_S`` (it is parked) and at most ``STALE_S`` ago (it will not time out first)."""
    return (
        waiter.sample is None
        and waiter.parked_at > 0
        and GRACE_S <= now - waiter.parked_at <= STALE_S
    )


async def _long_poll(
    ctx: Context, waiter: _Waiter, counters: Counter[str], gate: asyncio.Semaphore, query: str
) -> None:
    """``GET /inboxes/{id}/wait?<query>`` on one keep-alive connection, again and again."""
    conn = HttpConnection(ctx.stack.http_port, ctx.fixtures.key)
    async with gate:
        await conn.connect()
    path = f"/api/v1/inboxes/{waiter.inbox_id}/wait?{query}"
    try:
        while True:
            waiter.parked_at = time.perf_counter()
            response = await conn.get(path)
            now = time.perf_counter()
            waiter.parked_at = 0.0
            counters[f"http_{response.status}"] += 1
            if response.status == 200:
                _answered(waiter, now, json.loads(response.body)["id"], counters)
            elif response.status != 204:
                await asyncio.sleep(1)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        counters[f"waiter_error {type(exc).__name__}"] += 1
    finally:
        conn.close()


async def rest_waiter(
    ctx: Context, waiter: _Waiter, counters: Counter[str], gate: asyncio.Semaphore
) -> None:
    """``GET /inboxes/{id}/wait?timeout=120``, again and again."""
    await _long_poll(ctx, waiter, counters, gate, "timeout=120")


async def to_waiter(
    ctx: Context, waiter: _Waiter, counters: Counter[str], gate: asyncio.Semaphore
) -> None:
    """``GET /inboxes/{id}/wait?timeout=120&to=<the waiter's tagged address>``, again and
    again."""
    to = urllib.parse.quote(waiter.address, safe="@")
    await _long_poll(ctx, waiter, counters, gate, f"timeout=120&to={to}")


async def client_waiter(
    ctx: Context, waiter: _Waiter, counters: Counter[str], gate: asyncio.Semaphore
) -> None:
    """The REST wait through our own async client (``pigeonhole_client.AsyncPigeonhole``:
    httpx, the response parsed into its ``Email``), ``timeout`` 120, again and again."""
    client_root = str(ROOT / "clients" / "python")  # a distribution of its own, not installed
    if client_root not in sys.path:
        sys.path.insert(0, client_root)
    import httpx
    from pigeonhole_client import AsyncPigeonhole, PigeonholeError, WaitTimeout

    logging.getLogger("httpx").setLevel(logging.WARNING)
    url = f"http://127.0.0.1:{ctx.stack.http_port}"
    try:
        http = httpx.AsyncClient(event_hooks={"response": [waiter.headers_arrived]})
        async with AsyncPigeonhole(
            url, ctx.fixtures.key, max_retries=0, http_client=http
        ) as client:
            async with gate:
                await client.me()  # the connection opened before the first sample
            while True:
                waiter.parked_at, waiter.headers_at = time.perf_counter(), 0.0
                try:
                    email = await client.inboxes.wait(waiter.inbox_id, timeout=120)
                except WaitTimeout:  # the bare client's 204: park again
                    counters["http_204"] += 1
                    continue
                except PigeonholeError as exc:  # as the bare client does with an error status
                    waiter.parked_at = 0.0
                    counters[f"error {type(exc).__name__}"] += 1
                    await asyncio.sleep(1)
                    continue
                now = time.perf_counter()
                waiter.parked_at = 0.0
                counters["http_200"] += 1
                _answered(waiter, now, email.id, counters)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        counters[f"waiter_error {type(exc).__name__}"] += 1


async def mcp_waiter(
    ctx: Context, waiter: _Waiter, counters: Counter[str], gate: asyncio.Semaphore
) -> None:
    """An MCP session (the official client over streamable HTTP) calling ``wait_for_email``
    (timeout 120) again and again; the tool result's email id ends the sample."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    logging.getLogger("httpx2").setLevel(logging.WARNING)  # a line per request otherwise
    url = f"http://127.0.0.1:{ctx.stack.http_port}/mcp"
    headers = {"Authorization": f"Bearer {ctx.fixtures.key}"}
    try:
        async with contextlib.AsyncExitStack() as stack:
            async with gate:
                http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
                http.event_hooks["response"].append(waiter.headers_arrived)
                read, write = await stack.enter_async_context(
                    streamable_http_client(url, http_client=http)
                )
                client = await stack.enter_async_context(ClientSession(read, write))
                await client.initialize()
                # Each session is made ready before it is measured, as an agent's is after its
                # first call: every MCP client lists the tools before it calls one, and the SDK's
                # client compiles a tool's output schema at that tool's first result (tens of
                # ms: it checks the schema against the JSON Schema metaschema). Otherwise most
                # samples (200 messages over 200 sessions) held both, one session after another
                # in this one process: a tools/list exchange and that compile per session.
                await client.list_tools()
                await client.call_tool("wait_for_email", {"inbox": waiter.inbox_id, "timeout": 0})
            arguments = {"inbox": waiter.inbox_id, "timeout": 120}
            while True:
                waiter.parked_at, waiter.headers_at = time.perf_counter(), 0.0
                result = await client.call_tool("wait_for_email", arguments)
                now = time.perf_counter()
                waiter.parked_at = 0.0
                if result.is_error:
                    counters["tool_error"] += 1
                    await asyncio.sleep(1)
                    continue
                content = result.structured_content or {}
                counters[f"found_{content.get('found')}"] += 1
                if content.get("found"):
                    _answered(waiter, now, content["email"]["id"], counters)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        counters[f"waiter_error {type(exc).__name__}"] += 1


async def scenario_wait(ctx: Context) -> dict:
    sizes = ctx.sizes
    return await _waits(
        ctx, "a", ctx.fixtures.inboxes[: sizes.waiters], sizes.messages, rest_waiter
    )


async def scenario_to(ctx: Context) -> dict:
    """(t) ``waiters`` waiters on the one shared inbox, each with a ``to`` filter naming its own
    plus tag; each message goes to the tag of a random parked waiter."""
    inbox_id, address = ctx.fixtures.fanout
    local, domain = address.split("@")
    tags = [(inbox_id, f"{local}+w{n:04d}@{domain}") for n in range(ctx.sizes.waiters)]
    return await _waits(ctx, "t", tags, ctx.sizes.messages, to_waiter)


async def scenario_mcp(ctx: Context) -> dict:
    """(m) the REST wait (through the bare client and through ``pigeonhole_client``) and MCP
    ``wait_for_email``, each with ``mcp_sessions`` waiters on their own inboxes, all parked on
    the same web process; the messages take turns between the three kinds at (a)'s rate, so all
    are measured in the same seconds (a burst of noise on a shared machine lands on each, not
    on whichever ran last)."""
    sizes, inboxes = ctx.sizes, ctx.fixtures.inboxes
    count = sizes.mcp_sessions
    rest, client, mcp = await _mixed_waits(
        ctx,
        "m",
        [
            (inboxes[:count], rest_waiter),
            (inboxes[count : 2 * count], client_waiter),
            (inboxes[2 * count : 3 * count], mcp_waiter),
        ],
        sizes.mcp_messages,
    )
    return {"rest": rest, "client": client, "mcp": mcp, "cpu": mcp["cpu"]}


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _until_idle(pid: int, limit: float, below: float = 0.1, window: float = 0.5) -> None:
    """Until the process used under ``below`` of a CPU over ``window`` seconds (at most
    ``limit`` seconds)."""
    deadline = time.perf_counter() + limit
    while time.perf_counter() < deadline:
        before = _cpu_seconds(pid)
        await asyncio.sleep(window)
        if (_cpu_seconds(pid) - before) / window < below:
            return


async def _waits(
    ctx: Context,
    name: str,
    inboxes: list[tuple[str, str]],
    messages: int,
    waiter_loop: WaiterLoop,
) -> dict:
    """Parks a waiter per inbox, sends ``messages`` (after the warm-up) to random parked waiters
    at the scenario rate, and measures each from the DATA ``250`` to the waiter's answer."""
    return (await _mixed_waits(ctx, name, [(inboxes, waiter_loop)], messages))[0]


async def _mixed_waits(
    ctx: Context,
    name: str,
    kinds: list[tuple[list[tuple[str, str]], WaiterLoop]],
    messages: int,
) -> list[dict]:
    """:func:`_waits` for one or more kinds of waiter on the same web process: each kind's
    waiters are parked in turn (the web process's memory read before and after each), then
    message ``n`` goes to a random parked waiter of kind ``n % len(kinds)``, so every kind is
    measured in the same seconds of the same run, under the same load; ``messages`` measured
    messages of each kind. One result per kind, in order."""
    sizes, fx, stack = ctx.sizes, ctx.fixtures, ctx.stack
    redis = aioredis.from_url(ctx.redis_url)
    rng = random.Random(20)
    gate = asyncio.Semaphore(sizes.connect_concurrency)

    async def subscribed(groups: list[str]) -> int:
        count = 0
        for start in range(0, len(groups), 500):
            answer = await redis.pubsub_numsub(*groups[start : start + 500])
            count += sum(1 for _, subscribers in answer if subscribers)
        return count

    parked_kinds: list[dict] = []
    tasks: list[asyncio.Future] = []
    for inboxes, waiter_loop in kinds:
        counters: Counter[str] = Counter()
        waiters = [
            _Waiter(inbox_id, address, fx.group_prefix + inbox_id) for inbox_id, address in inboxes
        ]
        rss_before = rss_kb(stack.web.pid)
        tasks += [asyncio.ensure_future(waiter_loop(ctx, w, counters, gate)) for w in waiters]
        started = time.perf_counter()
        groups = [w.group for w in waiters]
        parked = 0
        while time.perf_counter() - started < 120:
            parked = await subscribed(groups)
            if parked == len(waiters):
                break
            await asyncio.sleep(0.25)
        if len(set(groups)) < len(groups):
            # Waiters sharing a group ((t)): Redis shows it subscribed from the first one on,
            # while the others are still being admitted (a thousand requests' first reads queue
            # in the web process's database threads, the wake-ups' reads behind them). Parked
            # means the web process has gone quiet.
            await _until_idle(stack.web.pid, limit=120)
        park_seconds = time.perf_counter() - started
        await asyncio.sleep(SETTLE_S)
        rss_parked = rss_kb(stack.web.pid)
        parked_kinds.append(
            {
                "waiters": waiters,
                "counters": counters,
                "samples": [],
                "figures": {
                    "waiters": len(waiters),
                    "parked": parked,
                    "park_seconds": round(park_seconds, 2),
                    "rss_before_kb": rss_before,
                    "rss_parked_kb": rss_parked,
                    "kb_per_waiter": round((rss_parked - rss_before) / max(1, parked), 1),
                },
            }
        )

    async def pick(waiters: list[_Waiter], counters: Counter[str]) -> _Waiter:
        for _ in range(500):
            now = time.perf_counter()
            ready = [w for w in waiters if eligible(w, now)]
            if ready:
                waiter = rng.choice(ready)
                if await subscribed([waiter.group]):
                    return waiter
                counters["picked_not_subscribed"] += 1
            await asyncio.sleep(0.01)
        raise RuntimeError("no parked waiter to send to")

    async def deliver(sample: _Sample, waiter: _Waiter) -> None:
        try:
            sample.acked, line = await smtp_send(
                stack.smtp_port, SENDER, waiter.address, bench_message(waiter.address, sample.seq)
            )
            sample.email_id = line.split()[-1]
        except Exception as exc:
            sample.error = f"smtp {type(exc).__name__}: {exc}"
            if waiter.sample is sample:
                waiter.sample = None

    window = ctx.cpu_window()
    profilers = ctx.profilers(name)
    samples: list[_Sample] = []
    sends: list[asyncio.Task] = []
    total = (sizes.warmup + messages) * len(kinds)
    # The harness's own garbage collector is kept out of the measured window: with 200 MCP client
    # sessions in this process, its full collections stalled the loop that timestamps answers for
    # tens of ms, counted as the server's latency (the web process keeps its collector).
    gc.collect()
    gc.disable()
    t0 = time.perf_counter()
    for seq in range(total):
        delay = t0 + seq / sizes.rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        kind = parked_kinds[seq % len(kinds)]
        waiter = await pick(kind["waiters"], kind["counters"])
        sample = _Sample(seq, waiter.inbox_id, warmup=seq < sizes.warmup * len(kinds))
        waiter.sample = sample
        samples.append(sample)
        kind["samples"].append(sample)
        sends.append(asyncio.ensure_future(deliver(sample, waiter)))
    send_seconds = time.perf_counter() - t0
    await asyncio.gather(*sends)
    deadline = time.perf_counter() + 15
    while time.perf_counter() < deadline and not all(s.complete for s in samples):
        await asyncio.sleep(0.05)
    gc.enable()
    cpu = window.result()
    profiles = _stop_profilers(profilers)

    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await redis.aclose()

    results = []
    for kind in parked_kinds:
        measured = [s for s in kind["samples"] if not s.warmup]
        good = _answered_right(measured)
        series = [  # (seconds since the first message, latency ms), for plots and drift
            (round(s.acked - t0, 3), _ms(s.received - s.acked))  # type: ignore[operator]
            for s in good
        ]
        results.append(
            {
                **kind["figures"],
                "messages_measured": len(measured),
                "messages_warmup": sizes.warmup,
                "target_rate": sizes.rate,
                "achieved_rate": round(total / send_seconds, 2) if send_seconds else None,
                "kinds_alternating": len(kinds),
                **latency_figures(measured),
                "counters": dict(kind["counters"]),
                "cpu": cpu,
                "profiles": profiles,
                "series": series,
            }
        )
    return results


def _answered_right(measured: list[_Sample]) -> list[_Sample]:
    return [
        s
        for s in measured
        if s.acked is not None and s.received is not None and s.received_id == s.email_id
    ]


def latency_figures(measured: list[_Sample]) -> dict:
    """250 → answer of the measured messages of a wait scenario, and what went wrong.

    A measured message whose waiter never answered it (within 15 s of the last send), answered
    another email, or that could not be sent is a miss: it ranks in the percentiles as slower
    than every answer (infinite) rather than being left out, and a percentile that falls on one
    is None ("missed" in the report: its target is not met)."""
    good = _answered_right(measured)
    latencies = [s.received - s.acked for s in good]  # type: ignore[operator]
    missed = len(measured) - len(good)
    ranked = latencies + [math.inf] * missed
    out: dict = {
        "delivered": len(good),
        "lost": sum(1 for s in measured if s.error is None and s.received is None),
        "mismatched": sum(1 for s in measured if s.received and s.received_id != s.email_id),
        "smtp_errors": sum(1 for s in measured if s.error),
        "response_before_250": sum(1 for v in latencies if v < 0),
        "missed": missed,
    }
    if ranked:
        for p in (50, 90, 99):
            value = percentile(ranked, p)
            out[f"p{p}_ms"] = _ms(value) if math.isfinite(value) else None
    if latencies:
        out.update(
            mean_answered_ms=_ms(statistics.fmean(latencies)),
            min_ms=_ms(min(latencies)),
            max_answered_ms=_ms(max(latencies)),
        )
    split = [s for s in good if s.headers_at is not None]
    if split:  # a client library's share: from the response's headers to the sample's end
        client_side = [s.received - s.headers_at for s in split]  # type: ignore[operator]
        out["client_side_p50_ms"] = _ms(percentile(client_side, 50))
        out["client_side_p99_ms"] = _ms(percentile(client_side, 99))
        before = [s.headers_at - s.acked for s in split]  # type: ignore[operator]
        out["to_headers_p50_ms"] = _ms(percentile(before, 50))
        out["to_headers_p99_ms"] = _ms(percentile(before, 99))
    return out


# --- (b) fan-out --------------------------------------------------------------------------------


async def scenario_fanout(ctx: Context) -> dict:
    sizes, fx, stack = ctx.sizes, ctx.fixtures, ctx.stack
    inbox_id, address = fx.fanout
    path = f"/api/v1/inboxes/{inbox_id}/stream"
    streams = [SseStream(stack.http_port, path, fx.key) for _ in range(sizes.fanout_streams)]
    live, failures, open_seconds = await _open_all(streams, sizes.connect_concurrency)
    arrived: Counter[int] = Counter()  # repetition -> streams that have its frame
    complete: dict[int, asyncio.Event] = {}

    def on_hit(stream: SseStream, _: float) -> None:
        rep = len(stream.hits)
        arrived[rep] += 1
        if arrived[rep] == len(live) and rep in complete:
            complete[rep].set()

    for stream in live:
        stream.follow(RECEIVED_MARKER, on_hit)
    await asyncio.sleep(SETTLE_S)

    window = ctx.cpu_window()
    profilers = ctx.profilers("b")
    reps: list[dict] = []
    for rep in range(1, sizes.fanout_repeats + 1):
        complete[rep] = asyncio.Event()
        acked, line = await smtp_send(
            stack.smtp_port, SENDER, address, bench_message(address, 10_000 + rep)
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(complete[rep].wait(), timeout=10)
        arrivals = sorted(s.hits[rep - 1] for s in live if len(s.hits) >= rep)
        reps.append(
            {
                "email_id": line.split()[-1],
                "streams_received": len(arrivals),
                "first_ms": _ms(arrivals[0] - acked) if arrivals else None,
                "median_ms": _ms(statistics.median(arrivals) - acked) if arrivals else None,
                "last_ms": _ms(arrivals[-1] - acked) if arrivals else None,
                "complete": len(arrivals) == len(live),
            }
        )
        await asyncio.sleep(1)
    cpu = window.result()
    profiles = _stop_profilers(profilers)
    await close_all(streams)

    lasts = [r["last_ms"] for r in reps if r["complete"]]
    return {
        "streams_requested": len(streams),
        "streams_open": len(live),
        "open_failures": dict(failures),
        "open_seconds": round(open_seconds, 2),
        "repeats": reps,
        "last_median_ms": round(statistics.median(lasts), 2) if lasts else None,
        "last_max_ms": max(lasts) if lasts else None,
        "incomplete_repeats": sum(1 for r in reps if not r["complete"]),
        "cpu": cpu,
        "profiles": profiles,
    }


# --- (c) idle streams ---------------------------------------------------------------------------


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _tcp_peers(pid: int, ports: dict[int, str]) -> dict[str, int]:
    """The process's established TCP connections by the peer's well-known port (from /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    counts = dict.fromkeys(ports.values(), 0)
    counts["other"] = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[9] not in inodes or fields[3] != "01":  # 01: ESTABLISHED
                continue
            local, remote = (
                int(fields[1].rsplit(":", 1)[1], 16),
                int(fields[2].rsplit(":", 1)[1], 16),
            )
            name = ports.get(remote) or ports.get(-local)
            counts[name or "other"] += 1
    return counts


async def scenario_idle(ctx: Context) -> dict:
    sizes, fx, stack = ctx.sizes, ctx.fixtures, ctx.stack
    pid = stack.web.pid

    def stream_for(number: int) -> SseStream:
        inbox_id, _ = fx.inboxes[number % len(fx.inboxes)]
        return SseStream(stack.http_port, f"/api/v1/inboxes/{inbox_id}/stream", fx.key)

    # Warm-up: the first streams import lazily, connect to PostgreSQL and Redis, fill caches.
    warm, _, _ = await _open_all([stream_for(n) for n in range(50)], 50)
    await close_all(warm)
    await asyncio.sleep(SETTLE_S + 1)
    before = rss_kb(pid)
    fds_before = _open_fds(pid)

    window = ctx.cpu_window()
    streams = [stream_for(n) for n in range(sizes.idle_streams)]
    live, failures, open_seconds = await _open_all(streams, sizes.connect_concurrency)
    for stream in live:
        stream.follow(b"event: ", lambda stream, t: None)
    await asyncio.sleep(SETTLE_S + 1)
    held = sum(1 for s in live if not s.closed)
    after = rss_kb(pid)
    peak = rss_kb(pid, "VmHWM")
    fds_after = _open_fds(pid)
    redis_port = urlsplit(ctx.redis_url).port or 6379
    pg_port = (urlsplit(ctx.database_url).port if ctx.database_url else None) or 5432
    peers = _tcp_peers(
        pid, {-stack.http_port: "clients", redis_port: "redis", pg_port: "postgresql"}
    )
    cpu = window.result()

    await close_all(streams)
    await asyncio.sleep(SETTLE_S + 2)
    after_close = rss_kb(pid)
    return {
        "streams_requested": len(streams),
        "streams_held": held,
        "open_failures": dict(failures),
        "open_seconds": round(open_seconds, 2),
        "inboxes": min(len(fx.inboxes), len(streams)),
        "rss_before_kb": before,
        "rss_after_kb": after,
        "rss_peak_kb": peak,
        "rss_after_close_kb": after_close,
        "kb_per_stream": round((after - before) / held, 1) if held else None,
        "web_fds_before": fds_before,
        "web_fds_after": fds_after,
        "web_tcp_connections": peers,
        "cpu": cpu,
    }


RUNNERS: dict[str, Callable[[Context], Awaitable[dict]]] = {
    "a": scenario_wait,
    "b": scenario_fanout,
    "c": scenario_idle,
    "m": scenario_mcp,
    "t": scenario_to,
}
