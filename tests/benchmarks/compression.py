"""TOAST compression of raw messages: pglz (PostgreSQL's default) against LZ4 and none.

Run: ``python -m tests.benchmarks.compression`` (uses the local PostgreSQL; creates and drops its
own database ``compression_measure``). It stores the benchmark's realistic 64 KB message (a 44 KB
PDF attachment) 200 times, five to a transaction by ``COPY`` as the receive path does, alone and
with a second copy of the attachment's bytes (what an attachment row held before it kept a span),
and prints the wall time per message of three rounds for each method. docs/architecture.md
(Storage) says what it decided.
"""

from __future__ import annotations

import random
import time

import psycopg

from tests.benchmarks.ingest import realistic_64k

SERVER = "postgres://postgres@127.0.0.1:5432/postgres"
DSN = "postgres://postgres@127.0.0.1:5432/compression_measure"
MESSAGES = 200
BATCH = 5


def _round(conn: psycopg.Connection, raws: list[bytes], copies: list[bytes] | None) -> float:
    """Milliseconds per message to store every raw message (and attachment copy)."""
    started = time.perf_counter()
    for at in range(0, len(raws), BATCH):
        with conn.transaction(), conn.cursor() as cursor:
            with cursor.copy("COPY raw (content) FROM STDIN") as copy:
                for raw in raws[at : at + BATCH]:
                    copy.write_row((raw,))
            if copies is not None:
                with cursor.copy("COPY attachment (content) FROM STDIN") as copy:
                    for content in copies[at : at + BATCH]:
                        copy.write_row((content,))
    return (time.perf_counter() - started) / len(raws) * 1000


def measure(method: str, *, with_copy: bool) -> list[float]:
    raws = [realistic_64k("inbox@pigeonhole.test", seq) for seq in range(MESSAGES)]
    copies = [b"%PDF-1.4\n" + random.Random(seq).randbytes(44_000) for seq in range(MESSAGES)]
    times = []
    with psycopg.connect(DSN, autocommit=True) as conn:
        for _ in range(3):
            conn.execute("DROP TABLE IF EXISTS raw, attachment")
            conn.execute("CREATE TABLE raw (id serial PRIMARY KEY, content bytea)")
            conn.execute("CREATE TABLE attachment (id serial PRIMARY KEY, content bytea)")
            for table in ("raw", "attachment"):
                if method == "none":
                    conn.execute(f"ALTER TABLE {table} ALTER content SET STORAGE EXTERNAL")
                else:
                    conn.execute(f"ALTER TABLE {table} ALTER content SET COMPRESSION {method}")
            times.append(_round(conn, raws, copies if with_copy else None))
    return times


def main() -> None:
    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS compression_measure")
        conn.execute("CREATE DATABASE compression_measure")
    try:
        for method in ("pglz", "lz4", "none"):
            for with_copy in (False, True):
                times = ", ".join(f"{t:.2f}" for t in measure(method, with_copy=with_copy))
                what = "raw + attachment copy" if with_copy else "raw only"
                print(f"{method:5} {what:22} {times} ms a message")
    finally:
        with psycopg.connect(SERVER, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS compression_measure")


if __name__ == "__main__":
    main()
