"""Raw-message storage: one commit with the bytes in PostgreSQL against a file write with fsync.

Run: python tests/benchmarks/storage.py (uses the local PostgreSQL; creates and drops its own
database ``storage_measure``). docs/architecture.md (Storage) says what it decided."""

import hashlib
import os
import shutil
import statistics
import tempfile
import time

import psycopg

DSN = "postgres://postgres@127.0.0.1:5432/postgres"
with psycopg.connect(DSN, autocommit=True) as c:
    c.execute("DROP DATABASE IF EXISTS storage_measure")
    c.execute("CREATE DATABASE storage_measure")
conn = psycopg.connect("postgres://postgres@127.0.0.1:5432/storage_measure")
conn.execute("CREATE TABLE email (id text primary key, subject text, size int)")
conn.execute(
    "CREATE TABLE raw (id text primary key references email(id) on delete cascade, content bytea, sha text)"
)
conn.execute("ALTER TABLE raw ALTER COLUMN content SET STORAGE EXTERNAL")
conn.commit()
d = tempfile.mkdtemp(dir="/work")


def db_way(i, data):
    with conn.transaction():
        conn.execute("INSERT INTO email VALUES (%s,%s,%s)", (f"d{i}", "s", len(data)))
        conn.execute(
            "INSERT INTO raw VALUES (%s,%s,%s)", (f"d{i}", data, hashlib.sha256(data).hexdigest())
        )


def file_way(i, data):
    p = os.path.join(d, f"f{i}.eml")
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, data)
    os.fsync(fd)
    os.close(fd)
    dfd = os.open(d, os.O_RDONLY)
    os.fsync(dfd)
    os.close(dfd)
    with conn.transaction():
        conn.execute("INSERT INTO email VALUES (%s,%s,%s)", (f"f{i}", "s", len(data)))


for size in (4096, 65536, 1048576):
    data = os.urandom(size // 2) + b"A" * (size // 2)
    for name, fn in (("database", db_way), ("file+fsync", file_way)):
        ts = []
        for i in range(200 if size < 1e6 else 40):
            t = time.perf_counter()
            fn(f"{size}-{i}", data)
            ts.append(time.perf_counter() - t)
        print(
            f"{size // 1024:>5} KB {name:11} median {statistics.median(ts) * 1000:.2f} ms  p95 {sorted(ts)[int(len(ts) * 0.95)] * 1000:.2f} ms"
        )
conn.close()
with psycopg.connect(DSN, autocommit=True) as c:
    c.execute("DROP DATABASE storage_measure")
shutil.rmtree(d)
