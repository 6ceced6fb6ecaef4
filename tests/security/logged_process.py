"""A child process of the project whose stderr goes to a file, for the tests that hammer a web
process with requests it answers 4xx (revoked keys, rate limits): it logs a warning per answer,
hundreds a second, and a pipe drained by a thread of the busy test process could make it wait
for the test while it holds database connections."""

from __future__ import annotations

import os
import subprocess
import tempfile

from tests.live import ROOT, Process
from tests.live import _wait_port as wait_port


class LoggingToFile(Process):
    """``tests.live.Process`` with stderr in a temporary file; ``tail()`` reads its end."""

    def start(self) -> Process:
        self.file = tempfile.TemporaryFile()  # noqa: SIM115  (lives as long as the object)
        self.proc = subprocess.Popen(
            self.argv, cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=self.file
        )
        wait_port(self.port, self.proc)
        return self

    def tail(self, size: int = 20_000) -> str:
        self.file.seek(0, os.SEEK_END)
        self.file.seek(max(0, self.file.tell() - size))
        return self.file.read().decode("utf-8", "replace")
