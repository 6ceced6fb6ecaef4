"""The few private parts of CPython's standard library the application reads, each with a safe
default where it reads them; these checks fail naming the Python version and what moved, so that
a new Python is read against those places:

- ``mail/message/decoding.py``: ``codecs.CodecInfo._is_text_encoding`` keeps bytes-to-bytes and
  str-to-str codecs (``base64``, ``zlib``, ``rot13`` …) out of a message's charsets;
- ``mail/smtpd/writer.py``: ``ProcessPoolExecutor._processes`` gives the writer child's process id
  (``ProcessWriter.pid``, for tests and benchmarks).

(asyncio's ``StreamReader._buffer`` is checked with the aiosmtpd adapter that uses it.)"""

from __future__ import annotations

import codecs
import inspect
import sys
from concurrent.futures import ProcessPoolExecutor

PYTHON = f"Python {sys.version.split()[0]}"


def test_codecs_say_which_are_text_encodings() -> None:
    for name in ("utf-8", "latin-1", "cp1252", "shift_jis"):
        assert getattr(codecs.lookup(name), "_is_text_encoding", None) is True, (
            f"{PYTHON}: codecs.lookup({name!r})._is_text_encoding is not True"
        )
    for name in ("base64", "zlib", "rot13", "hex", "uu", "quopri", "bz2"):
        assert getattr(codecs.lookup(name), "_is_text_encoding", None) is False, (
            f"{PYTHON}: codecs.lookup({name!r})._is_text_encoding is not False"
        )


def test_the_process_pool_keeps_its_processes_by_pid() -> None:
    assert "self._processes = {}" in inspect.getsource(ProcessPoolExecutor.__init__), (
        f"{PYTHON}: ProcessPoolExecutor no longer keeps _processes"
    )
    assert "self._processes[p.pid] = p" in inspect.getsource(ProcessPoolExecutor._spawn_process), (
        f"{PYTHON}: ProcessPoolExecutor._processes is no longer keyed by pid"
    )
