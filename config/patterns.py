"""The one bounded matcher for every regular expression a user supplies: the wait's ``subject``
filter, label rules, the label tester, and whatever comes next. Nothing else compiles or runs a
user's pattern.

The contract:

- :func:`compile_user_pattern` validates and compiles (``regex`` package, its V0 syntax, which is
  the stdlib's; case-insensitive; cached). It raises :class:`InvalidPattern`, whose message the
  caller reports as its own ``validation_error``, for a syntax error, a pattern over
  ``MAX_PATTERN_LENGTH`` characters, or one whose bounded repeats multiply past
  ``MAX_EXPANSION``: ``regex`` unrolls a repeat such as ``a{100}`` while compiling, so
  ``((((a{100}){100}){100}){100})`` would be a program of 10^8 steps that takes the process's
  memory before any match runs.
- :meth:`UserPattern.search` looks at the first ``MAX_INPUT`` characters of the text only and
  stops after ``PATTERN_TIMEOUT_MS``. A :class:`Budget` bounds the total time of the searches of
  one unit of work (a wait request, the label rules of one email, one tester run) to
  ``PATTERN_BUDGET_MS``, however many patterns and texts it has. Both count the search's own
  work, not the time the machine gave to others: ``regex``'s limit does not run while the process
  is descheduled, and the budget is charged the searching thread's CPU time (charged by the wall
  clock, a busy machine could spend a wait's budget on a cheap pattern, and the wait's mail then
  matched nothing). A search that times out, or that the spent budget no longer lets run, is
  ``Outcome.TIMED_OUT``: it counts as no match, and is logged (each timeout, and the budget's
  exhaustion once).
- Never on an event loop: ``regex`` releases the GIL while it matches a ``str``, so a search in a
  worker thread leaves the process's other threads running; async code awaits
  :meth:`UserPattern.asearch`, which runs the search in this module's own thread pool.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor

import regex
from django.conf import settings

logger = logging.getLogger("pigeonhole.patterns")

MAX_PATTERN_LENGTH = 500
MAX_INPUT = 100_000  # characters of a text a pattern is run against; the rest is not looked at
MAX_EXPANSION = 100_000  # product of nested bounded repeats a pattern may have (see above)
_FLAGS = regex.IGNORECASE | regex.V0


class InvalidPattern(ValueError):
    """Not a pattern we run; ``str()`` is a sentence for the caller's validation error."""


class Outcome(enum.Enum):
    MATCH = "match"
    NO_MATCH = "no_match"
    TIMED_OUT = "timed_out"  # counts as no match

    @property
    def matched(self) -> bool:
        return self is Outcome.MATCH


def timeout_seconds() -> float:
    return settings.PATTERN_TIMEOUT_MS / 1000


class Budget:
    """The matching time one unit of work may still spend, across all its searches."""

    def __init__(self, seconds: float | None = None) -> None:
        self.left = settings.PATTERN_BUDGET_MS / 1000 if seconds is None else seconds
        self.exhausted_logged = False

    def spent(self) -> bool:
        return self.left <= 0


class UserPattern:
    """A compiled user pattern; see the module's contract."""

    def __init__(self, source: str, compiled: regex.Pattern) -> None:
        self.source = source
        self._compiled = compiled

    def search(self, text: str, budget: Budget | None = None) -> Outcome:
        """Whether the pattern occurs in ``text`` (its first ``MAX_INPUT`` characters); blocking."""
        limit = timeout_seconds()
        if budget is not None:
            if budget.spent():
                if not budget.exhausted_logged:
                    budget.exhausted_logged = True
                    logger.warning("pattern budget spent; %r not run", self.source[:100])
                return Outcome.TIMED_OUT
            limit = min(limit, budget.left)
        haystack = text[:MAX_INPUT]
        started = time.thread_time()
        try:
            found = self._compiled.search(haystack, timeout=limit, concurrent=True)
        except TimeoutError:
            logger.warning(
                "pattern %r timed out after %.0f ms on %d characters",
                self.source[:100],
                limit * 1000,
                len(haystack),
            )
            return Outcome.TIMED_OUT
        finally:
            if budget is not None:  # the CPU the search took, not the time others had
                budget.left -= time.thread_time() - started
        return Outcome.MATCH if found is not None else Outcome.NO_MATCH

    async def asearch(self, text: str, budget: Budget | None = None) -> Outcome:
        """:meth:`search` from async code: in this module's threads, never on the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(_executor, self.search, text, budget)


# Its own threads: a search never waits for a database call's thread, nor holds one.
_executor = ThreadPoolExecutor(
    max_workers=min(32, (os.cpu_count() or 1) + 4), thread_name_prefix="pattern"
)


def compile_user_pattern(source: str) -> UserPattern:
    """The compiled pattern, or :class:`InvalidPattern` saying why not."""
    if not isinstance(source, str):
        raise InvalidPattern("Must be a string.")
    if len(source) > MAX_PATTERN_LENGTH:
        raise InvalidPattern(f"At most {MAX_PATTERN_LENGTH} characters.")
    return _compile(source)


@functools.lru_cache(maxsize=2048)
def _compile(source: str) -> UserPattern:
    expansion = _expansion(source)
    if expansion > MAX_EXPANSION:
        raise InvalidPattern(
            f"Its repeat counts multiply to {expansion:,}, above {MAX_EXPANSION:,}; "
            "use * or + for long runs."
        )
    try:
        compiled = regex.compile(source, _FLAGS)
    except (regex.error, OverflowError, RecursionError, MemoryError) as exc:
        # OverflowError: a repeat count above what the engine supports (a{99999999999}).
        raise InvalidPattern(f"Not a valid regular expression: {exc}.") from None
    return UserPattern(source, compiled)


_ESCAPE_WITH_BRACES = frozenset("pPNxuUg")  # \p{L}, \N{name}, \x{41}, \g{1}: not repeats
_REPEAT = regex.compile(r"\{\s*(\d*)\s*(?:(,)\s*(\d*)\s*)?\}")


def _expansion(source: str) -> int:
    """An upper bound of the steps ``regex`` unrolls the pattern into: each bounded repeat
    ``{m}``, ``{m,n}`` multiplies what it repeats by its largest count, alternatives add up.
    A conservative scan of the text, not a parser: it never understates, and a syntax error is
    left to the compiler."""
    # Each open group: [weight of its finished alternatives, weight so far, weight of last atom].
    stack: list[list[int]] = [[0, 0, 0]]
    i, length = 0, len(source)
    while i < length:
        char = source[i]
        top = stack[-1]
        if char == "\\":
            end = i + 2
            if end < length and source[i + 1] in _ESCAPE_WITH_BRACES and source[end] == "{":
                close = source.find("}", end)
                end = close + 1 if close != -1 else length
            top[1] += 1
            top[2] = 1
            i = end
            continue
        if char == "[":
            j = i + 1
            if j < length and source[j] == "^":
                j += 1
            if j < length and source[j] == "]":
                j += 1  # a leading ] is a member
            while j < length and source[j] != "]":
                j += 2 if source[j] == "\\" else 1
            top[1] += 1
            top[2] = 1
            i = j + 1
            continue
        if char == "(":
            stack.append([0, 0, 0])
            i += 1
            continue
        if char == ")" and len(stack) > 1:
            done = stack.pop()
            weight = max(1, done[0] + done[1])
            stack[-1][1] += weight
            stack[-1][2] = weight
            i += 1
            continue
        if char == "|":
            top[0] += top[1]
            top[1] = top[2] = 0
            i += 1
            continue
        if char == "{":
            repeat = _REPEAT.match(source, i)
            if repeat is not None and (repeat.group(1) or repeat.group(3)):
                low, comma, high = repeat.groups()
                count = int(high) if comma and high else int(low or 0)
                top[1] += top[2] * (max(count, 1) - 1)
                top[2] *= max(count, 1)
                i = repeat.end()
                if top[1] > MAX_EXPANSION * 10:  # already far past: no need to scan on
                    return top[1]
                continue
        top[1] += 1
        top[2] = 1
        i += 1
    while len(stack) > 1:  # unclosed groups: the compiler reports them
        done = stack.pop()
        stack[-1][1] += done[0] + done[1]
    return stack[0][0] + stack[0][1]
