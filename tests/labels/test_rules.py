"""The rules engine: validation paths, every field and operator, negation, any/all, the regex bound."""

from __future__ import annotations

import logging
import threading

import pytest

from labels.rules import Facts, Match, evaluate, validate

FACTS = Facts(
    from_address="billing@mail.stripe.com",
    from_name="Stripe Billing",
    to=["agent@pigeonhole.test", "cc@corp.example"],
    subject="Your receipt from Acme #1234",
    text="Thanks for your payment of $20.00.",
    html="<p>Thanks for your <b>payment</b></p>",
    headers=[("List-Id", "<news.acme.example>"), ("X-Priority", "1")],
    attachment_names=["receipt-1234.pdf"],
)


def rule(field: str, op: str, value: str = "", **extra: object) -> dict:
    return {"match": "any", "conditions": [{"field": field, "op": op, "value": value, **extra}]}


@pytest.mark.parametrize(
    ("field", "op", "value", "extra", "expected"),
    [
        ("from", "contains", "STRIPE", {}, True),
        ("from", "equals", "billing@mail.stripe.com", {}, True),
        ("from", "equals", "stripe billing", {}, True),
        ("from", "starts_with", "billing@", {}, True),
        ("from", "ends_with", "stripe.com", {}, True),
        ("from", "ends_with", "@stripe.com", {}, False),
        ("from", "domain", "stripe.com", {}, True),
        ("from", "domain", "@mail.stripe.com", {}, True),
        ("from", "domain", "tripe.com", {}, False),
        ("to", "domain", "corp.example", {}, True),
        ("to", "equals", "agent@pigeonhole.test", {}, True),
        ("subject", "regex", r"receipt .* #\d+", {}, True),
        ("subject", "regex", r"^invoice", {}, False),
        ("text", "contains", "$20.00", {}, True),
        ("html", "contains", "<b>payment</b>", {}, True),
        ("body", "contains", "<b>", {}, True),
        ("body", "contains", "thanks for your payment", {}, True),
        ("header", "contains", "news.acme", {"name": "list-id"}, True),
        ("header", "exists", "", {"name": "X-Priority"}, True),
        ("header", "exists", "", {"name": "X-Missing"}, False),
        ("attachment_name", "ends_with", ".PDF", {}, True),
        ("attachment_name", "exists", "", {}, True),
        ("has_attachments", "exists", "", {}, True),
        ("has_attachments", "equals", "false", {}, False),
        ("subject", "contains", "receipt", {"negate": True}, False),
        ("subject", "contains", "invoice", {"negate": True}, True),
    ],
)
def test_fields_and_operators(field: str, op: str, value: str, extra: dict, expected: bool) -> None:
    rules, issues = validate(rule(field, op, value, **extra))
    assert issues == []
    assert evaluate(rules, FACTS).matched is expected


def test_any_and_all() -> None:
    conditions = [
        {"field": "subject", "op": "contains", "value": "receipt"},
        {"field": "from", "op": "domain", "value": "paypal.com"},
    ]
    any_rules, _ = validate({"match": "any", "conditions": conditions})
    all_rules, _ = validate({"match": "all", "conditions": conditions})
    result = evaluate(any_rules, FACTS)
    assert result.matched and result.reason == 'subject contains "receipt"'
    result = evaluate(all_rules, FACTS)
    assert not result.matched and "paypal.com" in result.reason


def test_empty_rules_never_match() -> None:
    assert validate({}) == ({}, [])
    assert not evaluate({}, FACTS).matched
    rules, issues = validate({"match": "all", "conditions": []})
    assert issues == [] and not evaluate(rules, FACTS).matched


@pytest.mark.parametrize(
    ("rules", "paths"),
    [
        ("nope", ["rules"]),
        ({"match": "some", "conditions": []}, ["rules.match"]),
        ({"conditions": "x"}, ["rules.conditions"]),
        (
            {"conditions": [{"field": "from", "op": "like", "value": "x"}]},
            ["rules.conditions.0.op"],
        ),
        (
            {
                "conditions": [
                    {"field": "body", "op": "contains", "value": "x"},
                    {"field": "cc", "op": "contains", "value": "x"},
                ]
            },
            ["rules.conditions.1.field"],
        ),
        (
            {"conditions": [{"field": "subject", "op": "regex", "value": "(unclosed"}]},
            ["rules.conditions.0.value"],
        ),
        (
            {"conditions": [{"field": "subject", "op": "regex", "value": "a" * 501}]},
            ["rules.conditions.0.value"],
        ),
        ({"conditions": [{"field": "header", "op": "exists"}]}, ["rules.conditions.0.name"]),
        (
            {"conditions": [{"field": "subject", "op": "contains", "value": "x", "name": "h"}]},
            ["rules.conditions.0.name"],
        ),
        (
            {"conditions": [{"field": "subject", "op": "contains", "value": ""}]},
            ["rules.conditions.0.value"],
        ),
        (
            {"conditions": [{"field": "subject", "op": "contains", "value": "x", "negate": "yes"}]},
            ["rules.conditions.0.negate"],
        ),
        (
            {"conditions": [{"field": "has_attachments", "op": "contains", "value": "x"}]},
            ["rules.conditions.0.op"],
        ),
        ({"conditions": ["x"]}, ["rules.conditions.0"]),
        (
            {"conditions": [{"field": "from", "op": "contains", "value": "x"}] * 51},
            ["rules.conditions"],
        ),
    ],
)
def test_validation_paths(rules: object, paths: list[str]) -> None:
    normalised, issues = validate(rules)
    assert normalised == {}
    assert [issue["path"] for issue in issues] == paths


# Each pattern backtracks exponentially on its slow text (a run unbounded would outlast the test
# run by far) and matches its quick text at once.
CATASTROPHIC = [
    pytest.param(r"(x+x+)+y", "x" * 3000, "xxxy", id="nested-plus"),
    pytest.param(r"(a|aa)+$", "a" * 5000 + "b", "aaaa", id="overlapping-alternatives"),
    pytest.param(r"^(\w+\s?)*!$", "a" * 5000 + "!a", "hello world!", id="words-then-bang"),
]
HANG = 30  # seconds: a search that has not ended by then is unbounded (the limit is 50 ms)


def _evaluate_or_fail(rules: dict, facts: Facts) -> Match:
    """``evaluate`` in a thread, so that an unbounded search fails the test instead of hanging
    it (``regex`` releases the GIL while it matches, so the join's timeout is honoured)."""
    results: list[Match] = []
    worker = threading.Thread(target=lambda: results.append(evaluate(rules, facts)), daemon=True)
    worker.start()
    worker.join(HANG)
    assert not worker.is_alive(), f"the regex condition still ran after {HANG} s: not bounded"
    return results[0]


@pytest.mark.parametrize(("pattern", "slow", "quick"), CATASTROPHIC)
def test_catastrophic_regex_is_bounded(
    pattern: str, slow: str, quick: str, caplog: pytest.LogCaptureFixture
) -> None:
    rules, issues = validate(rule("text", "regex", pattern))
    assert issues == []
    caplog.set_level(logging.WARNING, logger="pigeonhole.patterns")
    result = _evaluate_or_fail(rules, Facts(text=slow * 100))  # 100 KB are looked at
    assert result.matched is False  # a timed-out condition does not match
    assert result.notes == ["regex timed out on text"]
    assert f"pattern {pattern!r} timed out after" in caplog.text
    # The bound stops slow searches only: the same condition still matches what it describes.
    matched = _evaluate_or_fail(rules, Facts(text=quick))
    assert matched.matched is True and matched.notes == []
    assert matched.reason == f'text regex "{pattern}"'


AUTH = Facts(
    authentication={"spf": ["softfail"], "dkim": ["pass", "fail"], "dmarc": ["fail"], "arc": []}
)


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("auth.spf", "softfail", True),
        ("auth.spf", "pass", False),
        ("auth.dkim", "pass", True),  # any signature's result
        ("auth.dkim", "fail", True),
        ("auth.dmarc", "fail", True),
        ("auth.arc", "none", False),  # no value: nothing to match
    ],
)
def test_authentication_fields(field: str, value: str, expected: bool) -> None:
    rules, issues = validate({"conditions": [{"field": field, "op": "equals", "value": value}]})
    assert issues == []
    assert evaluate(rules, AUTH).matched is expected


def test_authentication_fields_of_an_unchecked_email_match_nothing() -> None:
    rules, _ = validate({"conditions": [{"field": "auth.dmarc", "op": "exists"}]})
    assert evaluate(rules, Facts()).matched is False
    assert evaluate(rules, AUTH).matched is True
