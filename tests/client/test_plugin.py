"""The pytest plugin (issue 27, item 2) and the example project (clients/python/examples/signup):
its tests run in a pytest of their own (a subprocess, as a user's CI runs them) with the plugin
loaded by ``-p`` (the entry point does it once the client is installed) and configured by
``--pigeonhole-url`` / ``--pigeonhole-key``; the app mails over SMTP to the live server.
A deliberately failing variant's report shows what the inbox received."""

from __future__ import annotations

import re
import subprocess
import sys

from pigeonhole_client import Pigeonhole

from tests.client.conftest import CLIENT_ROOT, client_env
from tests.live import Stack

EXAMPLE = CLIENT_ROOT / "examples" / "signup"


def run_example(stack: Stack, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = client_env(stack, "", SIGNUP_SMTP_PORT=str(stack.smtp_port))
    del env["PIGEONHOLE_API_KEY"]  # the options below configure the plugin, not the environment
    del env["PIGEONHOLE_URL"]
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # none of the server's pytest plugins
    command = [sys.executable, "-m", "pytest", "-p", "pigeonhole_client.pytest_plugin"]
    command += ["-p", "no:cacheprovider", "--pigeonhole-url", stack.base_url]
    command += ["--pigeonhole-key", key, "-rA", *args]
    return subprocess.run(
        command, cwd=EXAMPLE, env=env, capture_output=True, text=True, timeout=180
    )


def test_the_example_passes_with_the_inbox_fixture(
    stack: Stack, api_key: str, ph: Pigeonhole
) -> None:
    result = run_example(stack, api_key)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout
    # each test's inbox was deleted at its teardown
    assert [inbox.address for inbox in ph.inboxes.list(include_expired=True)] == []


def test_a_failing_test_reports_what_its_inbox_received(
    stack: Stack, api_key: str, ph: Pigeonhole
) -> None:
    result = run_example(stack, api_key, "failing")
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "1 failed" in out
    section = re.search(r"-+ pigeonhole inbox (\S+@\S+) -+\n(.*?)\n(.*?)\n", out)
    assert section, out
    address, header, line = section.groups()
    assert header == f"{address} received 1 email(s):"
    match = re.fullmatch(
        r"(\S+)  from noreply@signup\.example  subject 'Your sign-up code'  code (\d{6})", line
    )
    assert match, line
    # the code listed is the one mailed: the failed assertion shows it as confirm()'s argument
    assert f"'someone-else@signup.example', '{match.group(2)}')" in out
    # the inbox was still deleted at teardown, after the report was made
    assert address not in {inbox.address for inbox in ph.inboxes.list(include_expired=True)}
