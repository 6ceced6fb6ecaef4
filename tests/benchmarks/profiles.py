"""Summaries of the py-spy profiles ``--profile`` writes (collapsed stacks, one per line).

``python -m tests.benchmarks.profiles FILE [--top N] [--match TEXT] [--threads]`` prints, per
thread, the share of samples each function is on the stack for (inclusive) and at the top of
(self); ``--match`` keeps only stacks that pass through a function whose frame contains TEXT;
stacks of waiting threads (epoll, locks, an idle pool worker) are left out unless ``--idle``.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
SITE = "site-packages/"
# Leaf frames of a thread that waits (py-spy's idle detection misses some in --nonblocking mode).
IDLE_LEAVES = (
    "select (selectors.py",
    "wait (threading.py",
    "_worker (concurrent/futures/thread.py",
    "get (queue.py",
)


def short(frame: str) -> str:
    """``func (module/file.py)`` without the line number and the venv prefix."""
    match = FRAME.match(frame.strip())
    if not match:
        return frame.strip()
    path = match["file"]
    if SITE in path:
        path = path.split(SITE, 1)[1]
    elif "/work/main/" in path:
        path = path.split("/work/main/", 1)[1]
    elif "/lib/python3" in path:
        path = "stdlib/" + path.split("/lib/python3", 1)[1].split("/", 1)[1]
    return f"{match['func']} ({path})"


def load(path: Path) -> list[tuple[list[str], int]]:
    stacks = []
    for line in path.read_text().splitlines():
        body, _, count = line.rpartition(" ")
        if body and count.isdigit():
            stacks.append((body.split(";"), int(count)))
    return stacks


def summarise(
    stacks: list[tuple[list[str], int]],
    *,
    top: int,
    match: str,
    by_thread: bool,
    busy_only: bool = True,
) -> str:
    out: list[str] = []
    groups: dict[str, list[tuple[list[str], int]]] = {}
    for frames, count in stacks:
        thread = frames[0] if by_thread and frames and frames[0].startswith("thread") else "all"
        body = frames[1:] if frames and frames[0].startswith(("thread", "process")) else frames
        if match and not any(match in f for f in body):
            continue
        if busy_only and body and any(idle in body[-1] for idle in IDLE_LEAVES):
            continue
        groups.setdefault(thread, []).append((body, count))
    for thread, items in sorted(groups.items(), key=lambda kv: -sum(c for _, c in kv[1])):
        total = sum(count for _, count in items)
        inclusive: Counter[str] = Counter()
        own: Counter[str] = Counter()
        for frames, count in items:
            names = [short(f) for f in frames]
            for name in set(names):
                inclusive[name] += count
            if names:
                own[names[-1]] += count
        out.append(f"== {thread}: {total} samples")
        out.append("-- inclusive")
        out += [f"{100 * n / total:6.1f}%  {name}" for name, n in inclusive.most_common(top)]
        out.append("-- self")
        out += [f"{100 * n / total:6.1f}%  {name}" for name, n in own.most_common(top)]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.profiles")
    parser.add_argument("file", type=Path)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--match", default="")
    parser.add_argument("--threads", action="store_true", help="one summary per thread")
    parser.add_argument("--idle", action="store_true", help="keep stacks of waiting threads")
    args = parser.parse_args(argv)
    stacks = load(args.file)
    print(
        summarise(
            stacks, top=args.top, match=args.match, by_thread=args.threads, busy_only=not args.idle
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
