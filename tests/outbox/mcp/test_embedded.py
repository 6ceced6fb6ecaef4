"""Embedded mode (``manage.py serve``, what ``make run`` starts: SQLite, no Redis, one process)
serves ``/mcp`` too: the official MCP client creates an inbox and gets its code over it."""

from __future__ import annotations

import asyncio
import json
import smtplib
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.live import ROOT, Process, child_env, free_port
from tests.mail.messages import message
from tests.outbox.mcp.conftest import session


def test_embedded_mode_serves_mcp(transactional_db: None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = child_env("unused")
        env["DATABASE_URL"] = f"sqlite:///{Path(tmp) / 'embedded.sqlite3'}"
        env.pop("REDIS_URL", None)
        run = {"cwd": ROOT, "env": env, "check": True, "capture_output": True, "timeout": 180}
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], **run)
        boot = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "bootstrap",
                "--workspace",
                "E",
                "--owner",
                "e@x.test",
                "--password",
                "pw-embedded-1",
                "--json",
            ],
            **run,
        )
        key = json.loads(boot.stdout)["api_key"]
        http_port, smtp_port = free_port(), free_port()
        argv = [sys.executable, "manage.py", "serve", "--port", str(http_port)]
        serve = Process([*argv, "--smtp-port", str(smtp_port)], http_port, env).start()
        try:

            def deliver(address: str) -> None:
                raw = message(to=address, subject="Confirm", text="Your code is 640192.")
                with smtplib.SMTP("127.0.0.1", smtp_port, timeout=30) as smtp:
                    smtp.sendmail("a@example.org", [address], raw)

            async def agent() -> tuple:
                async with session(f"http://127.0.0.1:{http_port}/mcp", key) as client:
                    created = await client.call_tool("create_inbox", {"local_part": "embedded"})
                    address = created.structured_content["address"]
                    getting = asyncio.create_task(
                        client.call_tool("get_verification_code", {"inbox": address, "timeout": 30})
                    )
                    await asyncio.sleep(0.5)
                    await asyncio.to_thread(deliver, address)
                    return created, await getting

            created, code = asyncio.run(agent())
        finally:
            serve.stop()
    assert not created.is_error, "\n".join(serve.logs)[-3000:]
    assert created.structured_content["address"].startswith("embedded@")
    assert not code.is_error and code.structured_content["code"] == "640192"
