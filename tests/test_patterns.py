"""The one bounded matcher of user patterns (config/patterns.py): what it accepts, the time limit,
the budget, the input cap, and that it runs off the event loop."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import time

import pytest

from config.patterns import (
    MAX_INPUT,
    Budget,
    InvalidPattern,
    Outcome,
    compile_user_pattern,
)

CATASTROPHIC = r"^(a|aa)+$"  # exponential backtracking in the regex engine on a...a!
SLOW_SUBJECT = "a" * 40 + "!"


@pytest.mark.parametrize(
    "pattern",
    [r"\d{6}", r"^sign[- ]in code \d+$", r"\p{L}{5}", "[a{]{1000}", r"(a|b{50}){50}", "", r"x{,3}"],
)
def test_ordinary_patterns_compile(pattern: str) -> None:
    assert compile_user_pattern(pattern).source == pattern


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("(", "Not a valid regular expression"),
        ("a" * 501, "At most 500 characters"),
        # regex unrolls bounded repeats while compiling: 10^8 steps would take the memory
        ("((((a{100}){100}){100}){100})", "repeat counts multiply"),
        ("(((a{100}){100}){100})", "repeat counts multiply"),
        ("(?:x{10}|y{20000}){9}", "repeat counts multiply"),
        ("a{99999999999}", "repeat counts multiply"),
    ],
)
def test_invalid_and_explosive_patterns_are_refused(pattern: str, says: str) -> None:
    # "repeat counts multiply" is the scan's refusal, before ``regex`` unrolls anything.
    with pytest.raises(InvalidPattern, match=says):
        compile_user_pattern(pattern)


def test_matching_is_case_insensitive_and_capped() -> None:
    pattern = compile_user_pattern("needle")
    assert pattern.search("a NEEDLE here") is Outcome.MATCH
    assert pattern.search("x" * (MAX_INPUT - 6) + "needle") is Outcome.MATCH
    assert pattern.search("x" * MAX_INPUT + "needle") is Outcome.NO_MATCH  # beyond the cap


def test_a_timed_out_search_is_no_match_and_logged(
    settings, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    settings.PATTERN_TIMEOUT_MS = 50
    caplog.set_level(logging.WARNING, logger="pigeonhole.patterns")
    outcome = compile_user_pattern(CATASTROPHIC).search(SLOW_SUBJECT)
    assert outcome is Outcome.TIMED_OUT and outcome.matched is False
    assert "timed out after 50 ms" in caplog.text


def test_the_budget_bounds_many_searches(settings, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    settings.PATTERN_TIMEOUT_MS = 50
    caplog.set_level(logging.WARNING, logger="pigeonhole.patterns")
    budget = Budget(0.12)
    pattern = compile_user_pattern(CATASTROPHIC)
    outcomes = [pattern.search(SLOW_SUBJECT, budget) for _ in range(50)]
    assert set(outcomes) == {Outcome.TIMED_OUT}
    assert budget.spent()
    timeouts = caplog.text.count("timed out after")
    assert 1 <= timeouts <= 4  # about 0.12 s / 50 ms (less on a busy machine); the rest not run
    assert caplog.text.count("budget spent") == 1
    assert compile_user_pattern("a").search("a", budget) is Outcome.TIMED_OUT


def test_a_search_stopped_by_the_machine_spends_only_its_cpu(settings) -> None:  # type: ignore[no-untyped-def]
    """The process is stopped (SIGSTOP, by a shell the test starts) for 2.5 s in the middle of a
    search that needs about 0.25 s of CPU. regex's limit (2 s) does not count the stop, and the
    search answers; its budget was charged the 2.8 s of wall time (a busy server could spend a
    wait's budget so) and is now charged the search's CPU only."""
    settings.PATTERN_TIMEOUT_MS = 2000
    pattern = compile_user_pattern(CATASTROPHIC)
    budget = Budget(2.0)
    stopper = subprocess.Popen(
        ["sh", "-c", f"sleep 0.05; kill -STOP {os.getpid()}; sleep 2.5; kill -CONT {os.getpid()}"]
    )
    started = time.monotonic()
    try:
        outcome = pattern.search("a" * 29 + "!", budget)
    finally:
        stopper.wait(10)
    waited = time.monotonic() - started
    assert waited > 2.0, waited  # the stop came while the search ran
    assert outcome is Outcome.NO_MATCH
    assert budget.left > 1.0, budget.left


def test_asearch_leaves_the_event_loop_free() -> None:
    pattern = compile_user_pattern(CATASTROPHIC)

    async def main() -> tuple[Outcome, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        task = asyncio.ensure_future(ticker())
        outcome = await pattern.asearch(SLOW_SUBJECT)
        task.cancel()
        return outcome, ticks

    outcome, ticks = asyncio.run(main())
    assert outcome is Outcome.TIMED_OUT
    assert ticks >= 5  # the loop kept turning while the search ran in a thread
