"""Files an instance writes for its operator: secrets readable by their owner only."""

from __future__ import annotations

import os
from pathlib import Path


def write_private(path: Path, text: str) -> None:
    """Writes ``text`` and a newline to ``path``, readable by its owner only (0600), also over
    an existing wider file; makes the parent directories."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        os.fchmod(out.fileno(), 0o600)  # O_CREAT's mode applies to a new file only
        out.write(text + "\n")
