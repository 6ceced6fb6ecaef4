"""Where the SMTP front door's batches of mail are written: one process for the host's smtpds,
a process of each smtpd's own, or a thread.

The group commit (``server.GroupCommit``) hands each batch to ``pipeline.receive_many`` and
answers every session of the batch when it returns. Three writers do that:

- :class:`mail.smtpd.shared.SharedWriter` (``SMTP_WRITER=shared``, the smtpd's default on
  PostgreSQL): the smtpds of a host share one writer process, which merges their batches into
  one transaction, so that a second smtpd does not halve the batches (``mail.smtpd.shared``).
- :class:`ProcessWriter` (``SMTP_WRITER=process``): one child
  process, spawned when the smtpd starts, with Django set up, runs every batch (rules, store,
  commit, wake-ups; parse and extract too for a message the smtpd did not digest). The smtpd's
  own process keeps the SMTP sessions and digests each message of up to 128 KB as its DATA
  ends (``server.DIGEST_IN_SESSION_BYTES``), so the two work on two batches at once. In one
  process the sessions' event loop and the writing thread took turns at the GIL: every socket
  call of either side handed it over (dozens of futex calls a message), and a batch waited for
  the loop at each of its dozen database round trips. With a process of its own the ingest
  benchmark received more mail a second than with the thread, for less of the smtpd's own CPU a
  message (docs/benchmark-methods.md; the figures are in the commit that made it the default).
- :class:`ThreadWriter` (``SMTP_WRITER=thread``; embedded mode, and the tests' in-process
  server, whose database is the test process's): a worker thread of the smtpd's process.

A :class:`ProcessWriter`'s child stores and commits exactly as the thread did, and the smtpd
answers ``250`` only after the child's commit returned. If the child dies (killed, out of memory),
the batch it held is answered ``451`` (the senders retry; a batch the child committed just before
dying may then arrive twice, as with any SMTP receiver that dies between its commit and its reply)
and a new child is started for the next batch. The child ignores SIGINT and SIGTERM: a signal to
the process group stops the smtpd, which finishes its batches and then ends the child; if the smtpd
itself is killed, the kernel kills the child (``PR_SET_PDEATHSIG``), whose open transaction rolls
back.

This module imports no model at import time: the child imports it before Django is set up.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from mail.pipeline import Incoming, Receipt

logger = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PARENT_POLL_SECONDS = 1.0


class WriterLost(Exception):
    """The writer process ended while it held the batch: whether it was stored is unknown."""


class BatchWriter(Protocol):
    # Whether the smtpd should parse and extract a message before handing it over: only when
    # the writer runs beside the event loop rather than sharing its interpreter (and GIL).
    digest_in_session: bool
    # Whether the writer merges concurrent requests into one batch itself (server.GroupCommit
    # then sends what waits at once instead of after the previous request's answer).
    merges: bool

    async def start(self) -> None: ...

    # Per message: its receipts, or the exception that kept it (alone) from being stored; a
    # writer may also raise for the whole batch (WriterLost: nobody knows what was stored).
    async def store(self, messages: Sequence[Incoming]) -> Sequence[list[Receipt] | Exception]: ...

    async def close(self) -> None: ...


def _write(messages: Sequence[Incoming]) -> list[list[Receipt]]:
    """One batch, in the writer's thread or process; the connection left healthy or closed."""
    from config.db import release_connections
    from mail import pipeline

    try:
        return pipeline.receive_many(messages) if messages else []
    finally:
        release_connections()


class ThreadWriter:
    """Batches written by a worker thread of the smtpd's own process."""

    digest_in_session = False
    merges = False

    async def start(self) -> None:
        return None

    async def store(self, messages: Sequence[Incoming]) -> list[list[Receipt]]:
        from asgiref.sync import sync_to_async

        return await sync_to_async(_write, thread_sensitive=False)(messages)

    async def close(self) -> None:
        return None


def _die_with(parent: int) -> None:
    """Ends this process when ``parent`` dies: nothing would answer for what it writes, and it
    would hold a database connection. Linux's ``PR_SET_PDEATHSIG`` (the kernel sends SIGKILL, so
    an unfinished batch rolls back); elsewhere a thread that watches the parent's id."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        watched = libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        watched = False
    if os.getppid() != parent:  # it died before the watch was set
        os._exit(1)
    if not watched:

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(PARENT_POLL_SECONDS)
            os._exit(1)

        threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _child_started(parent: int) -> None:
    """The writer process's set-up: tied to the smtpd's life, Django set up, its start-up
    objects out of the collector's way (as ``manage.py smtpd`` does for itself). Signals to the
    process group are the smtpd's to act on: it ends this process once its last batch is
    written and answered."""
    _die_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    import django

    django.setup()
    gc.collect()
    gc.freeze()


class ProcessWriter:
    """Batches written by one child process of the smtpd (see the module docstring)."""

    digest_in_session = True
    merges = False

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None

    @staticmethod
    def _new_pool() -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_child_started,
            initargs=(os.getpid(),),
        )

    async def start(self) -> None:
        """Starts the child and waits until it is ready (Django set up), so that the first mail
        does not wait for it."""
        self._pool = self._new_pool()
        await self.store([])

    async def store(self, messages: Sequence[Incoming]) -> list[list[Receipt]]:
        if self._pool is None:
            self._pool = self._new_pool()
        pool = self._pool
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, _write, list(messages))
        except BrokenProcessPool as exc:
            logger.error("the writer process ended while it held a batch of %d", len(messages))
            if self._pool is pool:
                pool.shutdown(wait=False)
                self._pool = self._new_pool()
            raise WriterLost() from exc

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.to_thread(pool.shutdown, wait=True)

    @property
    def pid(self) -> int | None:
        """The child's process id, once it runs (tests and benchmarks)."""
        processes = getattr(self._pool, "_processes", None) or {}
        return next(iter(processes), None)


def writer_for(kind: str) -> BatchWriter:
    """The writer ``SMTP_WRITER`` names: ``shared``, ``process`` or ``thread``."""
    if kind == "shared":
        from mail.smtpd.shared import SharedWriter

        return SharedWriter()
    if kind == "process":
        return ProcessWriter()
    if kind == "thread":
        return ThreadWriter()
    raise ValueError(f"SMTP_WRITER must be 'shared', 'process' or 'thread', not {kind!r}")
