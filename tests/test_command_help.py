"""Every flag of our management commands, and of the ``pigeonhole-server`` console command, says
what it does and its default (issue 25, item 5; issue 27, item 4): ``manage.py help bootstrap``
and ``pigeonhole-server --help`` are the operator's documentation at the terminal."""

from __future__ import annotations

import argparse

import pytest
from django.core.management import get_commands, load_command_class
from django.core.management.base import BaseCommand

from config.server import build_parser

# The project's own apps (pyproject.toml's import-linter root packages).
OUR_APPS = ("config", "events", "apikeys", "inboxes", "labels", "mail", "outbox", "webhooks")


def _our_commands() -> list[tuple[str, str]]:
    return sorted(
        (name, app) for name, app in get_commands().items() if app.split(".")[0] in OUR_APPS
    )


def _base_dests() -> set[str]:
    """The options every Django command has (--verbosity, --settings, …): Django's to document."""
    return {action.dest for action in BaseCommand().create_parser("manage.py", "base")._actions}


def test_the_walk_finds_our_commands() -> None:
    assert {"bootstrap", "createkey", "serve", "smtpd"} <= {name for name, _ in _our_commands()}


def _problems(parser: argparse.ArgumentParser, skip: set[str]) -> list[str]:
    """What the help of ``parser``'s options lacks: a text, or the default and its value."""
    problems = []
    for action in parser._actions:
        if action.dest in skip:
            continue
        label = "/".join(action.option_strings) or action.dest
        help_text = action.help or ""
        if not help_text.strip() or help_text == argparse.SUPPRESS:
            problems.append(f"{label}: no help")
            continue
        if not action.option_strings:  # a positional argument has no default
            continue
        default = action.default
        if default is None or default == argparse.SUPPRESS:
            continue
        if "default" not in help_text.lower():
            problems.append(f"{label}: the help does not say its default ({default!r})")
        elif not isinstance(default, bool) and str(default) not in help_text:
            problems.append(f"{label}: the help does not give the default value {default!r}")
    return problems


@pytest.mark.parametrize(("name", "app"), _our_commands())
def test_every_option_has_help_naming_its_default(name: str, app: str) -> None:
    parser = load_command_class(app, name).create_parser("manage.py", name)
    problems = _problems(parser, _base_dests())
    assert not problems, f"manage.py {name}: " + "; ".join(problems)


def test_every_option_of_pigeonhole_server_has_help_naming_its_default_and_variable() -> None:
    parser = build_parser(environ={})  # the defaults of an environment that sets none
    assert not _problems(parser, {"help"})
    for action in parser._actions:
        if action.dest != "help":
            variable = f"PIGEONHOLE_{action.dest.upper()}"
            assert f"environment: {variable}" in (action.help or ""), action.option_strings
            # The variable gives the default instead.
            from_env = build_parser(environ={variable: "4242"})
            assert from_env.parse_args([]).__dict__[action.dest] in ("4242", 4242)
