"""The ``pigeonhole`` command: inboxes, waiting for mail, listing, sending and streaming from a
shell step, e.g. ``CODE=$(pigeonhole wait --inbox signup@example.test --code --timeout 60)``;
``pigeonhole mcp`` serves the instance's MCP tools over stdio (``mcp_bridge``).

Configured by ``--url`` / ``--key`` or ``PIGEONHOLE_URL`` / ``PIGEONHOLE_API_KEY``. ``--json``
(before or after the command) prints JSON instead of text. Exit status: 0 on success, 1 when a
wait timed out (or the mail had no code / link), 2 on any other error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from ._core import Config
from .client import Inbox, NothingExtracted, Pigeonhole
from .errors import PigeonholeError, WaitTimeout

TIMED_OUT = 1
FAILED = 2


def _common() -> argparse.ArgumentParser:
    """Options accepted before and after the command (SUPPRESS: a later default never hides
    an earlier value)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=argparse.SUPPRESS, help="instance root ($PIGEONHOLE_URL)")
    common.add_argument("--key", default=argparse.SUPPRESS, help="API key ($PIGEONHOLE_API_KEY)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    return common


def parser() -> argparse.ArgumentParser:
    common = _common()
    top = argparse.ArgumentParser(
        prog="pigeonhole", description=__doc__.split("\n\n")[0], parents=[common]
    )
    commands = top.add_subparsers(dest="command", required=True)

    inbox = commands.add_parser("inbox", help="create, list or delete inboxes", parents=[common])
    inbox_commands = inbox.add_subparsers(dest="inbox_command", required=True)
    create = inbox_commands.add_parser("create", help="create an inbox", parents=[common])
    create.add_argument("--local-part", help="the part before @ (default: random)")
    create.add_argument("--domain", help="one of the instance's domains (default: its default)")
    create.add_argument("--name")
    create.add_argument("--ttl", type=int, metavar="MINUTES", help="minutes until it expires")
    create.add_argument("--tag", action="append", dest="tags", metavar="TAG")
    listing = inbox_commands.add_parser("list", help="list inboxes", parents=[common])
    listing.add_argument("--tag")
    listing.add_argument("-q", "--query", dest="q")
    delete = inbox_commands.add_parser("delete", help="delete an inbox", parents=[common])
    delete.add_argument("inbox", help="inbox id or address")

    wait = commands.add_parser(
        "wait", help="wait for an email; print its code, link or JSON", parents=[common]
    )
    wait.add_argument("--inbox", required=True, help="inbox id or address")
    what = wait.add_mutually_exclusive_group()
    what.add_argument("--code", action="store_true", help="print the verification code")
    what.add_argument(
        "--link",
        nargs="?",
        const="",
        metavar="KIND",
        help="print the primary link, or the first of KIND (verify, login, reset, …)",
    )
    wait.add_argument("--from", dest="from_", help="the sender must contain this")
    wait.add_argument("--subject", help="regular expression the subject must match")
    wait.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")
    wait.add_argument(
        "--since",
        help="ISO 8601 time, or 'now' (default: the inbox's creation, so mail that came "
        "before the wait started counts)",
    )

    emails = commands.add_parser("emails", help="list an inbox's emails", parents=[common])
    emails.add_argument("--inbox", required=True, help="inbox id or address")
    emails.add_argument("-q", "--query", dest="q")
    emails.add_argument("--limit", type=int, default=25, help="at most this many (default 25)")

    send = commands.add_parser("send", help="send an email from an inbox", parents=[common])
    send.add_argument("--inbox", required=True, help="inbox id or address to send from")
    send.add_argument("--to", action="append", required=True, metavar="ADDRESS")
    send.add_argument("--subject", required=True)
    send.add_argument("--text", required=True)

    stream = commands.add_parser(
        "stream", help="print an inbox's events as they happen", parents=[common]
    )
    stream.add_argument("--inbox", required=True, help="inbox id or address")
    stream.add_argument("--timeout", type=int, help="stop after this many seconds")
    stream.add_argument("--last-event-id", help="resume after this event id ('0': replay all)")

    commands.add_parser(
        "mcp",
        help="serve the instance's MCP tools over stdio (for Claude Desktop and other clients "
        "that start a command); needs pigeonhole-client[mcp]",
        parents=[common],
    )
    return top


def _print(data: Any) -> None:
    print(json.dumps(data, indent=None, sort_keys=True))


def _wait(ph: Pigeonhole, args: argparse.Namespace, as_json: bool) -> int:
    inbox: Inbox = ph.inboxes.get(args.inbox)
    since: Any = args.since
    if since == "now":
        since = datetime.now(timezone.utc)
    email = inbox.wait(from_=args.from_, subject=args.subject, timeout=args.timeout, since=since)
    if as_json or not (args.code or args.link is not None):
        _print(email.data)
        return 0
    if args.code:
        if not email.code:
            raise NothingExtracted(f"email {email.id} has no code", code="no_code")
        print(email.code)
        return 0
    link = email.link(args.link or None)
    if not link:
        raise NothingExtracted(f"email {email.id} has no {args.link or ''} link", code="no_link")
    print(link)
    return 0


def _mcp(args: argparse.Namespace) -> int:
    from . import mcp_bridge

    return mcp_bridge.main(Config.resolve(getattr(args, "url", None), getattr(args, "key", None)))


def run(args: argparse.Namespace) -> int:
    as_json = bool(getattr(args, "json", False))
    if args.command == "mcp":  # stdout is the protocol's: nothing else is printed there
        return _mcp(args)
    with Pigeonhole(getattr(args, "url", None), getattr(args, "key", None)) as ph:
        if args.command == "inbox":
            if args.inbox_command == "create":
                created = ph.inboxes.create(
                    local_part=args.local_part,
                    domain=args.domain,
                    name=args.name,
                    ttl_minutes=args.ttl,
                    tags=args.tags,
                )
                _print(created.data) if as_json else print(created.address)
            elif args.inbox_command == "list":
                found = list(ph.inboxes.list(tag=args.tag, q=args.q))
                if as_json:
                    _print([item.data for item in found])
                for item in [] if as_json else found:
                    print(f"{item.id}\t{item.address}\t{item.email_count}")
            else:
                target = ph.inboxes.get(args.inbox)
                target.delete()
                if as_json:
                    _print({"deleted": True, "id": target.id})
                else:
                    print(f"deleted {target.address}")
            return 0
        if args.command == "wait":
            return _wait(ph, args, as_json)
        if args.command == "emails":
            listed = []
            for summary in ph.emails.list(args.inbox, q=args.q, limit=min(args.limit, 100)):
                listed.append(summary)
                if len(listed) >= args.limit:
                    break
            if as_json:
                _print([item.data for item in listed])
            for item in [] if as_json else listed:
                print(f"{item.received_at}\t{item.sender}\t{item.subject}\t{item.id}")
            return 0
        if args.command == "send":
            item = ph.outbox.send(args.inbox, to=args.to, subject=args.subject, text=args.text)
            _print(item.data) if as_json else print(f"{item.id}\t{item.status}")
            return 0
        if args.command == "stream":
            events = ph.inboxes.stream(
                args.inbox, timeout=args.timeout, last_event_id=args.last_event_id
            )
            for event in events:
                if as_json:
                    _print({"id": event.id, "event": event.event, "data": event.data})
                else:
                    print(f"{event.event}\t{json.dumps(event.data, sort_keys=True)}")
                sys.stdout.flush()
            return 0
    return FAILED  # argparse makes a command required; never reached


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return run(args)
    except (WaitTimeout, NothingExtracted) as exc:
        print(f"pigeonhole: {exc.message}", file=sys.stderr)
        return TIMED_OUT
    except PigeonholeError as exc:
        print(f"pigeonhole: {exc}", file=sys.stderr)
        return FAILED
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
