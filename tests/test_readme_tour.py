"""The README's tour, run as written (issue 25, item 4): the shell block marked ``<!-- tour`` in
README.md goes to bash, in a fresh copy of the committed tree where ``make run`` is serving
(tests/quickstart.py), and must print the extracted verification code.

The one change made to the block is the two port numbers: the README names make run's
documented ports (8000, 2525), the test's ``make run`` listens on free ones so it never takes a
port a developer's own ``make run`` holds.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.quickstart import MakeRun, fresh_copy, quickstart_env

pytestmark = pytest.mark.live

TOUR_MARK = "<!-- tour"


def tour_block(readme: str) -> str:
    """The fenced block right after the tour marker, exactly as written."""
    found = re.search(
        rf"^{re.escape(TOUR_MARK)}.*?-->\n```(?:sh|bash)\n(.*?)^```$", readme, re.M | re.S
    )
    assert found, "README.md has no tour block (a fenced sh block after '<!-- tour … -->')"
    return found.group(1)


def test_tour_prints_the_extracted_code(tmp_path: Path) -> None:
    copy = fresh_copy(tmp_path / "pigeonhole")
    block = tour_block((copy / "README.md").read_text())
    # The documented ports, and nothing else, are swapped for this run's.
    assert re.search(r"\blocalhost:8000\b", block) and re.search(r"\b2525\b", block), block
    run = MakeRun(copy)
    script = re.sub(r"\blocalhost:8000\b", f"localhost:{run.port}", block)
    script = re.sub(r"\b2525\b", str(run.smtp_port), script)
    run.start()
    try:
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", script],
            cwd=copy,  # "in the checkout": the key is read from var/demo-admin-key
            env=quickstart_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        run.stop()
    assert done.returncode == 0, (done.stdout, done.stderr, run.text())
    lines = done.stdout.strip().splitlines()
    inbox = json.loads(lines[0])
    assert inbox["id"].startswith("inb_") and inbox["address"] == "signup@pigeonhole.test"
    assert lines[-1] == "482913", done.stdout
