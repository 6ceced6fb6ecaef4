"""Scenario 2 of the fault issue: ``250`` only after commit.

Faults are injected into PostgreSQL itself, so the real smtpd process meets them where they would
happen: a trigger that fails the raw-message write (``BEFORE INSERT ON mail_rawmessage``), one that
fails the event write, and a deferred constraint trigger that fails the ``COMMIT`` itself. Every
attempt must be answered with a 4xx (never ``250``) and leave nothing behind: no email, raw
message, attachment or event rows, inbox counters unchanged. With the fault removed, the client's
retry stores exactly one copy. In embedded mode the same faults are SQLite triggers and the
SMTP server is the one ``manage.py serve`` process.
"""

from __future__ import annotations

import smtplib
import sys
from dataclasses import dataclass, field
from email.utils import formatdate

from django.db import connection

from tests.live import Process, Stack, child_env, embedded, free_port

FAULTS = {
    "raw write": (
        "CREATE TRIGGER chaos_fault BEFORE INSERT ON mail_rawmessage "
        "FOR EACH ROW EXECUTE FUNCTION chaos_fail()",
        "mail_rawmessage",
    ),
    "event write": (
        "CREATE TRIGGER chaos_fault BEFORE INSERT ON webhooks_event "
        "FOR EACH ROW EXECUTE FUNCTION chaos_fail()",
        "webhooks_event",
    ),
    "commit": (
        "CREATE CONSTRAINT TRIGGER chaos_fault AFTER INSERT ON mail_email "
        "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION chaos_fail()",
        "mail_email",
    ),
}
# The same faults in SQLite (embedded mode). SQLite has no deferred triggers; its foreign keys
# are deferred (Django creates them DEFERRABLE INITIALLY DEFERRED), so a row pointed at a missing
# inbox inside the transaction makes the COMMIT itself fail.
SQLITE_FAULTS = {
    "raw write": (
        "CREATE TRIGGER chaos_fault BEFORE INSERT ON mail_rawmessage "
        "BEGIN SELECT RAISE(ABORT, 'chaos: injected fault'); END",
        "mail_rawmessage",
    ),
    "event write": (
        "CREATE TRIGGER chaos_fault BEFORE INSERT ON webhooks_event "
        "BEGIN SELECT RAISE(ABORT, 'chaos: injected fault'); END",
        "webhooks_event",
    ),
    "commit": (
        "CREATE TRIGGER chaos_fault AFTER INSERT ON mail_email BEGIN "
        "UPDATE mail_email SET inbox_id = 'inb_chaos_missing' WHERE id = NEW.id; END",
        "mail_email",
    ),
}


@dataclass
class Result:
    fault: str
    attempts: int
    answered_4xx: int = 0
    answered_250: int = 0
    other: list[str] = field(default_factory=list)
    leftover_rows: dict[str, int] = field(default_factory=dict)
    counters: tuple[int, int] = (0, 0)
    stored_after_retry: int = 0


def _message(seq: int, to: str, fault: str) -> bytes:
    return (
        f"From: faults@sender.example\r\nTo: {to}\r\nSubject: fault {fault} {seq}\r\n"
        f"Date: {formatdate()}\r\nMessage-ID: <{fault.replace(' ', '-')}.{seq}@faults.example>\r\n"
        "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n"
        "--b\r\nContent-Type: text/plain\r\n\r\nYour code is 424242.\r\n"
        "--b\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; "
        'filename="a.bin"\r\nContent-Transfer-Encoding: base64\r\n\r\nAAECAwQ=\r\n--b--\r\n'
    ).encode()


def _install(sql: str) -> None:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(sql)
            return
        cursor.execute(
            "CREATE OR REPLACE FUNCTION chaos_fail() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'chaos: injected fault'; END $$"
        )
        cursor.execute(sql)


def _remove(table: str) -> None:
    with connection.cursor() as cursor:
        on = f" ON {table}" if connection.vendor == "postgresql" else ""
        cursor.execute(f"DROP TRIGGER IF EXISTS chaos_fault{on}")


def _send(port: int, raw: bytes, to: str) -> tuple[int, str]:
    with smtplib.SMTP("127.0.0.1", port, timeout=30) as smtp:
        try:
            smtp.sendmail("faults@sender.example", [to], raw)
        except smtplib.SMTPDataError as exc:
            return exc.smtp_code, str(exc.smtp_error)
    return 250, ""


def run(database_name: str, inbox_id: str, address: str, *, attempts: int) -> list[Result]:
    from events.models import Event
    from inboxes.models import Inbox
    from mail.models import Attachment, Email, RawMessage

    if embedded():  # the SMTP front door of the one `manage.py serve` process
        stack = Stack(database_name)
        smtpd, port = stack.smtp.start(), stack.smtp_port
    else:
        port = free_port()
        argv = [sys.executable, "manage.py", "smtpd", "--host", "127.0.0.1", "--port", str(port)]
        smtpd = Process(argv, port, child_env(database_name)).start()
    faults = FAULTS if connection.vendor == "postgresql" else SQLITE_FAULTS
    results = []
    try:
        for fault, (sql, table) in faults.items():
            result = Result(fault, attempts)
            before_events = Event.objects.filter(inbox_id=inbox_id).count()
            _install(sql)
            try:
                for seq in range(attempts):
                    code, text = _send(port, _message(seq, address, fault), address)
                    if code == 250:
                        result.answered_250 += 1
                    elif 400 <= code < 500:
                        result.answered_4xx += 1
                    else:
                        result.other.append(f"{code} {text}")
            finally:
                _remove(table)
            emails = Email.objects.filter(inbox_id=inbox_id)
            result.leftover_rows = {
                "emails": emails.count(),
                "raw": RawMessage.objects.filter(email__inbox_id=inbox_id).count(),
                "attachments": Attachment.objects.filter(email__inbox_id=inbox_id).count(),
                "events": Event.objects.filter(inbox_id=inbox_id).count() - before_events,
            }
            inbox = Inbox.objects.get(pk=inbox_id)
            result.counters = (inbox.email_count, inbox.unread_count)
            code, _ = _send(port, _message(0, address, fault), address)  # the client's retry
            assert code == 250, f"retry without the fault answered {code}"
            result.stored_after_retry = emails.filter(subject=f"fault {fault} 0").count()
            emails.delete()  # the next fault starts from an empty inbox
            Inbox.objects.filter(pk=inbox_id).update(email_count=0, unread_count=0)
            results.append(result)
    finally:
        smtpd.stop()
    return results
