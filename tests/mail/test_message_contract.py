"""The contract of ``mail.message``: the standard library and named third-party libraries only.

Read from the source with ``ast`` (every import statement, at any depth, and any dynamic import
call), so a hidden function-local import of Django or of an app fails here as well.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import mail.message

PACKAGE = "mail.message"
ROOT = Path(mail.message.__file__).resolve().parent
# Third-party libraries the package may use; anything else needs a decision (and a line here).
THIRD_PARTY = frozenset({"nh3"})
MODULES = sorted(ROOT.rglob("*.py"))


def _imported(source: str, path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``source``, the text of the module at
    ``path`` (relative imports resolve from its package); dynamic imports read ``<dynamic>``."""
    package = PACKAGE.split(".") + list(path.relative_to(ROOT).parent.parts)
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((node.lineno, name))
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if called in {"__import__", "import_module"}:
                found.append((node.lineno, "<dynamic>"))
    return found


def _allowed(name: str) -> bool:
    top = name.split(".", 1)[0]
    if name == PACKAGE or name.startswith(PACKAGE + "."):
        return True
    return top in sys.stdlib_module_names or top in THIRD_PARTY


def test_the_package_has_modules() -> None:
    names = {path.stem for path in MODULES}
    assert {"parsing", "extraction", "htmltext", "sanitize"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda path: str(path.relative_to(ROOT)))
def test_imports_nothing_from_django_or_the_project(path: Path) -> None:
    imports = _imported(path.read_text(encoding="utf-8"), path)
    wrong = [f"line {line}: {name}" for line, name in imports if not _allowed(name)]
    assert not wrong, f"{PACKAGE} must import only the stdlib and {sorted(THIRD_PARTY)}: {wrong}"


@pytest.mark.parametrize(
    "source",
    [
        "from django.conf import settings",
        "import django",
        "def f():\n    from mail.models import Email",
        "from .. import pipeline",
        "from ...inboxes import models",
        "import importlib\nimportlib.import_module('django')",
        "import requests",
    ],
)
def test_the_check_catches_a_forbidden_import(source: str) -> None:
    # The reader above must see each way of reaching outside the package, at any depth.
    names = [name for _, name in _imported(source, ROOT / "parsing.py")]
    assert names and not all(_allowed(name) for name in names), names
