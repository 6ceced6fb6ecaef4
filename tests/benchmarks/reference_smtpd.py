"""The bare reference receivers that SMTP ingest is compared with (``tests.benchmarks.ingest``).

``python -m tests.benchmarks.reference_smtpd --port P --mode parse`` is aiosmtpd with the standard
library's ``email`` parser (``policy.default``) and nothing stored; ``--mode insert --dsn URL``
adds one PostgreSQL ``INSERT`` per message (raw bytes, sender, subject) through psycopg's async
connection, committed before the ``250``. No Django, no extraction, no events: the floor of what
"aiosmtpd + parse + store" costs on this machine, measured in the same run as our receiver.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
from email import policy
from email.parser import BytesParser
from typing import Any

from aiosmtpd.smtp import SMTP, Envelope, Session

PARSER = BytesParser(policy=policy.default)
TABLE = "bench_reference_mail"


def parse(data: bytes) -> tuple[str, str]:
    message = PARSER.parsebytes(data)
    for part in message.walk():  # every part's headers parsed, as a receiver has to
        part.get_content_type()
    return str(message.get("from", "")), str(message.get("subject", ""))


class ParseOnly:
    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        parse(envelope.original_content or b"")
        return "250 OK"


class ParseAndInsert:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.pool: asyncio.Queue[Any] = asyncio.Queue()

    async def open(self, size: int) -> None:
        import psycopg

        for _ in range(size):
            conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
            self.pool.put_nowait(conn)
        conn = await self.pool.get()
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {TABLE} (id bigserial PRIMARY KEY, sender text, "
            "subject text, raw bytea, received_at timestamptz DEFAULT now())"
        )
        self.pool.put_nowait(conn)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        raw = envelope.original_content or b""
        sender, subject = parse(raw)
        conn = await self.pool.get()
        try:
            await conn.execute(
                f"INSERT INTO {TABLE} (sender, subject, raw) VALUES (%s, %s, %s)",
                [sender, subject, raw],
            )
        finally:
            self.pool.put_nowait(conn)
        return "250 OK"


async def serve(port: int, mode: str, dsn: str) -> None:
    handler: Any
    if mode == "insert":
        handler = ParseAndInsert(dsn)
        await handler.open(10)
    else:
        handler = ParseOnly()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: SMTP(handler, data_size_limit=50 * 1024 * 1024, enable_SMTPUTF8=True),
        host="127.0.0.1",
        port=port,
        reuse_port=True,
    )
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    gc.collect()
    gc.freeze()
    await stop.wait()
    server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", choices=("parse", "insert"), required=True)
    parser.add_argument("--dsn", default="")
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.mode, args.dsn))


if __name__ == "__main__":
    main()
