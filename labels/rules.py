"""The rules engine (pure): validation with precise issue paths, and evaluation against an email.

A rules object is ``{"match": "any" | "all", "conditions": [{"field", "op", "value", "name",
"negate"}]}``. Fields: from, to, subject, text, html, body (text or html), header (the header
called ``name``), attachment_name, has_attachments, and the authentication verdicts
``auth.spf``, ``auth.dkim`` (each signature's result, ``none`` when unsigned), ``auth.dmarc``,
``auth.arc`` (``pass``, ``fail`` …; no value when the email was not checked). Operators:
contains, equals, starts_with, ends_with, regex, domain, exists. Matching is case-insensitive;
``{}`` or no conditions never matches. Regular expressions go through the one bounded matcher,
``config.patterns``: a time limit per search, an input cap, and a budget for all the searches of
one evaluation (one email's rules, however many labels and conditions it has), so a catastrophic
pattern cannot stall ingestion; a timed-out condition does not match, and the notes say so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from config.patterns import (
    MAX_INPUT,
    Budget,
    InvalidPattern,
    Outcome,
    compile_user_pattern,
)

FIELDS = (
    "from",
    "to",
    "subject",
    "text",
    "html",
    "body",
    "header",
    "attachment_name",
    "has_attachments",
    "auth.spf",
    "auth.dkim",
    "auth.dmarc",
    "auth.arc",
)
OPS = ("contains", "equals", "starts_with", "ends_with", "regex", "domain", "exists")
MAX_CONDITIONS = 50
MAX_VALUE = 1000
MAX_SCAN = MAX_INPUT
_DOMAIN_IN = re.compile(r"@([a-z0-9.-]+)", re.IGNORECASE)


@dataclass(frozen=True)
class Facts:
    """What rules can see of an email."""

    from_address: str = ""
    from_name: str = ""
    to: Sequence[str] = ()
    subject: str = ""
    text: str = ""
    html: str = ""
    headers: Sequence[tuple[str, str]] = ()
    attachment_names: Sequence[str] = ()
    # Mechanism ("spf", "dkim", "dmarc", "arc") -> its results (dkim: one per signature, or
    # "none"); empty when the email was not checked (mail.authentication.results).
    authentication: Mapping[str, Sequence[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Match:
    matched: bool
    reason: str
    notes: list[str] = field(default_factory=list)


def _issue(path: str, message: str) -> dict[str, str]:
    return {"path": path, "message": message}


def validate(rules: Any, path: str = "rules") -> tuple[dict, list[dict[str, str]]]:
    """The normalised rules and the issues found (empty when valid)."""
    if rules in (None, {}):
        return {}, []
    if not isinstance(rules, dict):
        return {}, [_issue(path, "Must be an object with 'match' and 'conditions'.")]
    issues: list[dict[str, str]] = []
    match = rules.get("match", "any")
    if match not in ("any", "all"):
        issues.append(_issue(f"{path}.match", "Must be 'any' or 'all'."))
    conditions = rules.get("conditions", [])
    if not isinstance(conditions, list):
        issues.append(_issue(f"{path}.conditions", "Must be a list."))
        conditions = []
    elif len(conditions) > MAX_CONDITIONS:
        issues.append(_issue(f"{path}.conditions", f"At most {MAX_CONDITIONS} conditions."))
    normalised = []
    for index, condition in enumerate(conditions):
        here = f"{path}.conditions.{index}"
        if not isinstance(condition, dict):
            issues.append(_issue(here, "Must be an object."))
            continue
        fld, op = condition.get("field"), condition.get("op")
        value, name, negate = (
            condition.get("value", ""),
            condition.get("name", ""),
            condition.get("negate", False),
        )
        if fld not in FIELDS:
            issues.append(_issue(f"{here}.field", f"Must be one of {', '.join(FIELDS)}."))
        if op not in OPS:
            issues.append(_issue(f"{here}.op", f"Must be one of {', '.join(OPS)}."))
        if not isinstance(value, str) or len(value) > MAX_VALUE:
            issues.append(_issue(f"{here}.value", f"Must be a string of at most {MAX_VALUE}."))
            value = ""
        elif op not in ("exists",) and fld != "has_attachments" and value == "":
            issues.append(_issue(f"{here}.value", "Required for this operator."))
        if not isinstance(negate, bool):
            issues.append(_issue(f"{here}.negate", "Must be a boolean."))
        if fld == "header":
            if not isinstance(name, str) or not name.strip() or len(name) > 200:
                issues.append(_issue(f"{here}.name", "The header name is required."))
        elif name not in ("", None):
            issues.append(_issue(f"{here}.name", "Only for field 'header'."))
        if fld == "has_attachments" and op not in ("exists", "equals"):
            issues.append(_issue(f"{here}.op", "has_attachments takes 'exists' or 'equals'."))
        if fld == "has_attachments" and op == "equals" and value.lower() not in ("true", "false"):
            issues.append(_issue(f"{here}.value", "Must be 'true' or 'false'."))
        if op == "regex" and isinstance(value, str):
            try:
                compile_user_pattern(value)
            except InvalidPattern as exc:
                issues.append(_issue(f"{here}.value", str(exc)))
        normalised.append(
            {
                "field": fld,
                "op": op,
                "value": value,
                "name": (name or "").strip(),
                "negate": bool(negate),
            }
        )
    if issues:
        return {}, issues
    return {"match": match, "conditions": normalised}, []


def _values(facts: Facts, fld: str, name: str) -> list[str]:
    if fld == "from":
        return [v for v in (facts.from_address, facts.from_name) if v]
    if fld == "to":
        return list(facts.to)
    if fld == "subject":
        return [facts.subject]
    if fld == "text":
        return [facts.text]
    if fld == "html":
        return [facts.html]
    if fld == "body":
        return [facts.text, facts.html]
    if fld == "header":
        wanted = name.lower()
        return [value for key, value in facts.headers if key.lower() == wanted]
    if fld == "attachment_name":
        return list(facts.attachment_names)
    if fld.startswith("auth."):
        return list(facts.authentication.get(fld.removeprefix("auth."), ()))
    return []


class _TimedOut(Exception):
    pass


def _test(op: str, value: str, candidate: str, budget: Budget) -> bool:
    haystack = candidate[:MAX_SCAN]
    if op == "exists":
        return bool(haystack.strip())
    if op == "regex":
        outcome = compile_user_pattern(value).search(haystack, budget)
        if outcome is Outcome.TIMED_OUT:
            raise _TimedOut
        return outcome.matched
    lowered, wanted = haystack.lower(), value.lower()
    if op == "contains":
        return wanted in lowered
    if op == "equals":
        return lowered.strip() == wanted.strip()
    if op == "starts_with":
        return lowered.startswith(wanted)
    if op == "ends_with":
        return lowered.endswith(wanted)
    if op == "domain":
        domain = wanted.lstrip("@")
        domains = _DOMAIN_IN.findall(lowered) or ([lowered] if "@" not in lowered else [])
        return any(d == domain or d.endswith("." + domain) for d in domains)
    return False


def _describe(condition: dict) -> str:
    target = f"header {condition['name']}" if condition["field"] == "header" else condition["field"]
    negation = "not " if condition["negate"] else ""
    if condition["op"] == "exists":
        return f"{target} {negation}exists"
    return f'{target} {negation}{condition["op"].replace("_", " ")} "{condition["value"]}"'


def _condition(condition: dict, facts: Facts, notes: list[str], budget: Budget) -> bool:
    fld, op, value = condition["field"], condition["op"], condition["value"]
    if fld == "has_attachments":
        has = bool(facts.attachment_names)
        result = has if op == "exists" else has == (value.lower() == "true")
    else:
        result = False
        for candidate in _values(facts, fld, condition["name"]):
            try:
                if _test(op, value, candidate, budget):
                    result = True
                    break
            except _TimedOut:
                notes.append(f"regex timed out on {fld}")
    return result != condition["negate"]


def evaluate(rules: dict, facts: Facts, budget: Budget | None = None) -> Match:
    """Whether ``rules`` match ``facts``, and why (the matching condition(s)). ``budget`` is
    the matching time left for every evaluation of the same email (a fresh one if None)."""
    conditions = rules.get("conditions") or []
    if not conditions:
        return Match(False, "no conditions")
    notes: list[str] = []
    budget = Budget() if budget is None else budget
    results = [(c, _condition(c, facts, notes, budget)) for c in conditions]
    if rules.get("match", "any") == "all":
        if all(ok for _, ok in results):
            return Match(True, " and ".join(_describe(c) for c, _ in results), notes)
        failed = next(c for c, ok in results if not ok)
        return Match(False, f"not matched: {_describe(failed)}", notes)
    for condition, ok in results:
        if ok:
            return Match(True, _describe(condition), notes)
    return Match(False, "no condition matched", notes)
