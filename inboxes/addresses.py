"""Pure address rules: local-part syntax, plus addressing, readable names, sender filters."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable

# RFC 5322 dot-atom without "+", which we reserve for plus addressing (local+tag@domain).
_ATEXT = r"[a-z0-9!#$%&'*/=?^_`{|}~-]"
LOCAL_PART_RE = re.compile(rf"^{_ATEXT}+(?:\.{_ATEXT}+)*$")
DOMAIN_RE = re.compile(r"^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9-]{2,63}$")

ADJECTIVES = (
    "able",
    "amber",
    "bold",
    "brave",
    "bright",
    "calm",
    "clever",
    "cool",
    "crisp",
    "daring",
    "eager",
    "fair",
    "fancy",
    "fast",
    "fierce",
    "fond",
    "gentle",
    "glad",
    "golden",
    "grand",
    "happy",
    "hardy",
    "jolly",
    "keen",
    "kind",
    "lively",
    "lucky",
    "merry",
    "mighty",
    "misty",
    "noble",
    "odd",
    "plucky",
    "polite",
    "proud",
    "quick",
    "quiet",
    "rapid",
    "rosy",
    "royal",
    "rustic",
    "shiny",
    "silent",
    "silver",
    "sleek",
    "smart",
    "snowy",
    "solid",
    "sunny",
    "swift",
    "tidy",
    "tiny",
    "vivid",
    "warm",
    "wild",
    "wise",
    "witty",
    "young",
    "zany",
    "zesty",
)
ANIMALS = (
    "badger",
    "bat",
    "bear",
    "beaver",
    "bison",
    "crane",
    "crow",
    "deer",
    "dingo",
    "dove",
    "eagle",
    "eel",
    "egret",
    "falcon",
    "ferret",
    "finch",
    "fox",
    "gecko",
    "goose",
    "hare",
    "hawk",
    "heron",
    "ibis",
    "jay",
    "koala",
    "lark",
    "lemur",
    "lion",
    "llama",
    "lynx",
    "marten",
    "mink",
    "mole",
    "moose",
    "newt",
    "otter",
    "owl",
    "panda",
    "pigeon",
    "puffin",
    "quail",
    "raven",
    "robin",
    "seal",
    "shrew",
    "sloth",
    "snail",
    "stoat",
    "swan",
    "tapir",
    "tiger",
    "toad",
    "trout",
    "viper",
    "walrus",
    "whale",
    "wolf",
    "wombat",
    "wren",
    "yak",
)


def readable_local_part() -> str:
    """A random name like ``brave-otter-42``."""
    return f"{secrets.choice(ADJECTIVES)}-{secrets.choice(ANIMALS)}-{secrets.randbelow(90) + 10}"


def is_valid_local_part(value: str) -> bool:
    return 1 <= len(value) <= 64 and bool(LOCAL_PART_RE.match(value))


def is_under(domain: str, parents: Iterable[str]) -> bool:
    """Whether ``domain`` is one of ``parents`` or a subdomain of one."""
    return any(domain == parent or domain.endswith("." + parent) for parent in parents)


def split_address(address: str) -> tuple[str, str]:
    """Lower-cased (local part, domain) of an address; ("", "") when it has no ``@``."""
    local, at, domain = address.strip().strip("<>").rpartition("@")
    if not at:
        return "", ""
    return local.lower(), domain.lower().rstrip(".")


def without_plus(local: str) -> str:
    """Plus addressing: ``local+anything`` is delivered to ``local``."""
    return local.split("+", 1)[0]


def canonical_address(address: str) -> str:
    """The inbox address a recipient maps to (lower case, plus tag removed)."""
    local, domain = split_address(address)
    if not domain:
        return ""
    return f"{without_plus(local)}@{domain}"


def normalize_sender_rule(rule: str) -> str:
    """``@Example.com`` → ``example.com``; ``Bob@Example.com`` → ``bob@example.com``."""
    return (
        rule.strip().lower().lstrip("@") if rule.strip().startswith("@") else rule.strip().lower()
    )


def _matches(sender: str, rule: str) -> bool:
    rule = normalize_sender_rule(rule)
    if not rule:
        return False
    if "@" in rule:
        return sender == rule
    domain = sender.rpartition("@")[2]
    return domain == rule or domain.endswith("." + rule)


def sender_allowed(sender: str, *, allow: list[str], block: list[str]) -> bool:
    """Block wins over allow; an empty allow list allows everyone not blocked."""
    sender = sender.strip().lower()
    if any(_matches(sender, rule) for rule in block):
        return False
    if allow:
        return any(_matches(sender, rule) for rule in allow)
    return True
