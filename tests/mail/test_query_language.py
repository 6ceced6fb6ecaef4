"""The query language of ``q`` (mail.query) on GET /emails, GET /inboxes/{id}/emails and the
dashboard's search box, over mail delivered through the pipeline; runs on PostgreSQL (GIN
full-text index) and in the embedded pass on SQLite (FTS5 kept by triggers)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.test import Client

from apikeys.models import Workspace
from inboxes import services as inbox_services
from inboxes.models import Inbox
from labels.models import Label
from mail import pipeline
from mail.models import Email
from mail.query import MAX_TERMS, QueryError, parse
from tests.conftest import Api, error_of
from tests.factories import MembershipFactory
from tests.mail.messages import PDF, message

pytestmark = pytest.mark.django_db

# Past the 200-character preview: only the whole-body index finds it.
FILLER = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 8


@pytest.fixture
def inbox(workspace: Workspace) -> Inbox:
    return inbox_services.inbox_create(workspace=workspace, local_part="box")


def deliver(inbox: Inbox, *, to: str | None = None, **kwargs: object) -> str:
    recipient = to or inbox.address
    raw = message(to=kwargs.pop("header_to", recipient), **kwargs)  # type: ignore[arg-type]
    delivery = pipeline.receive_one(raw, to=recipient)
    assert delivery.email_id, delivery
    return delivery.email_id


@pytest.fixture
def mail(api: Api, inbox: Inbox, workspace: Workspace) -> dict[str, str]:
    """Five emails that each operator tells apart."""
    ids = {
        "bank": deliver(
            inbox,
            sender="alerts@bank.example",
            sender_name="Big Bank",
            subject="Your statement is ready",
            text=FILLER + "Statement for the quarter. Your verification code is 482913.",
            headers={"X-Run": "run-4711"},
        ),
        "shop": deliver(
            inbox,
            sender="orders@shop.example",
            subject="Order shipped",
            text=FILLER + "The parcel left our warehouse in Zeppelin Strasse.",
            attachments=[("invoice.pdf", "application/pdf", PDF)],
            headers={"X-Run": "run-4712"},
        ),
        "link": deliver(
            inbox,
            sender="hello@social.example",
            subject="Confirm your account",
            text=FILLER + "Open https://social.example/verify?t=abc to confirm the account.",
        ),
        "tagged": deliver(
            inbox,
            to=inbox.address.replace("@", "+run9@"),
            sender="news@digest.example",
            subject="Weekly digest",
            text=FILLER + "Nothing of note happened in the warehouse this week.",
        ),
        "cc": deliver(
            inbox,
            header_to="someone@elsewhere.example",
            sender="team@corp.example",
            subject="Meeting notes",
            text="The quarter closed well.",
        ),
    }
    Label.objects.create(workspace=workspace, key="finance", name="Finance")
    api.call(
        "PATCH", f"emails/{ids['bank']}", {"labels": ["finance"], "read": True, "starred": True}
    )
    api.call("PATCH", f"emails/{ids['shop']}", {"read": True})
    Email.objects.filter(pk=ids["cc"]).update(received_at=datetime(2026, 1, 10, 12, tzinfo=UTC))
    return ids


def found(api: Api, q: str, path: str = "emails") -> set[str]:
    response = api.call("GET", path, {"q": q, "limit": 100})
    assert response.status_code == 200, response.json()
    return {e["id"] for e in response.json()["data"]}


def names(ids: dict[str, str], *keys: str) -> set[str]:
    return {ids[k] for k in keys}


# -- the parser alone ------------------------------------------------------------------------


def test_parser_terms_positions_and_negation() -> None:
    terms = parse('from:bank "click to"  -is:read header:X-Run=4711 10:30')
    assert [(t.field, t.value, t.negated, t.position) for t in terms] == [
        ("from", "bank", False, 0),
        ("text", "click to", False, 10),
        ("is", "read", True, 22),
        ("header", "X-Run", False, 31),
        ("text", "10:30", False, 49),
    ]
    assert terms[1].phrase and terms[3].header_value == "4711"
    assert parse("   ") == []


@pytest.mark.parametrize(
    ("query", "term", "position"),
    [
        ('hello "unterminated', '"unterminated', 6),
        ("a has:nothing", "has:nothing", 2),
        ("is:maybe", "is:maybe", 0),
        ("x before:2026-13-45", "before:2026-13-45", 2),
        ("after:yesterday", "after:yesterday", 0),
        ("from:", "from:", 0),
        ("ok - x", "-", 3),
        ('ok ""', '""', 3),
        ("header:=v", "header:=v", 0),
        ('ab"cd"', 'ab"cd', 0),
        ("x dmarc:maybe", "dmarc:maybe", 2),
        ("spf:", "spf:", 0),
        ("dkim:softfail", "dkim:softfail", 0),  # a result SPF gives, DKIM never does
    ],
)
def test_parser_errors_name_the_term_and_its_position(query: str, term: str, position: int) -> None:
    with pytest.raises(QueryError) as caught:
        parse(query)
    assert (caught.value.term, caught.value.position) == (term, position)


def test_parser_reads_authentication_results() -> None:
    terms = parse("DMARC:Fail -dkim:none arc:pass spf:softfail")
    assert [(t.field, t.value, t.negated) for t in terms] == [
        ("dmarc", "fail", False),
        ("dkim", "none", True),
        ("arc", "pass", False),
        ("spf", "softfail", False),
    ]


def test_parser_bounds_the_number_of_terms() -> None:
    assert len(parse(" ".join(["w"] * MAX_TERMS))) == MAX_TERMS
    with pytest.raises(QueryError) as caught:
        parse(" ".join(["w"] * (MAX_TERMS + 1)))
    assert caught.value.position == 2 * MAX_TERMS


# -- the API over stored mail ----------------------------------------------------------------


def test_bare_words_and_phrases_search_the_whole_body(api: Api, mail: dict[str, str]) -> None:
    assert found(api, "482913") == names(mail, "bank")  # past the preview
    assert found(api, "WAREHOUSE") == names(mail, "shop", "tagged")
    assert found(api, '"left our warehouse"') == names(mail, "shop")
    assert found(api, '"warehouse left"') == set()  # a phrase keeps its order
    assert found(api, "warehouse parcel") == names(mail, "shop")  # words are ANDed
    assert found(api, "quarter") == names(mail, "bank", "cc")
    assert found(api, "bank.example") == names(mail, "bank")  # sender, as q always did
    assert found(api, "big bank") == names(mail, "bank")  # sender name
    assert found(api, "statement") == names(mail, "bank")  # subject


def test_plain_q_finds_what_it_found_before(api: Api, mail: dict[str, str]) -> None:
    """Substrings of sender, subject and preview (the old search) are all still found."""
    assert found(api, "ank.exam") == names(mail, "bank")
    assert found(api, "confirm your acc") == names(mail, "link")
    assert found(api, "lorem ipsum") == names(mail, "bank", "shop", "link", "tagged")
    assert found(api, "re: 10:30") == set()  # words with colons that are no operators


def test_from_to_subject(api: Api, mail: dict[str, str], inbox: Inbox) -> None:
    assert found(api, "from:BANK.example") == names(mail, "bank")
    assert found(api, "from:digest") == names(mail, "tagged")
    assert found(api, "subject:shipped") == names(mail, "shop")
    assert found(api, 'subject:"statement is"') == names(mail, "bank")
    tagged = inbox.address.replace("@", "+run9@")
    assert found(api, f"to:{tagged}") == names(mail, "tagged")  # the envelope recipient
    assert found(api, "to:+run9@") == names(mail, "tagged")
    assert found(api, "to:someone@elsewhere.example") == names(mail, "cc")  # the To header
    assert found(api, f"-to:{tagged}") == names(mail, "bank", "shop", "link", "cc")


def test_label_inbox_header(
    api: Api, mail: dict[str, str], inbox: Inbox, workspace: Workspace
) -> None:
    assert found(api, "label:finance") == names(mail, "bank")
    assert found(api, "-label:finance") == names(mail, "shop", "link", "tagged", "cc")
    other = inbox_services.inbox_create(workspace=workspace, local_part="other")
    elsewhere = deliver(other, subject="Elsewhere", text="warehouse")
    assert found(api, f"inbox:{other.pk}") == {elsewhere}
    assert found(api, f"inbox:{other.address.upper()} warehouse") == {elsewhere}
    assert found(api, f"-inbox:{inbox.address} warehouse") == {elsewhere}
    assert found(api, "header:x-run=RUN-4711") == names(mail, "bank")
    assert found(api, "header:X-Run") == names(mail, "bank", "shop")
    assert found(api, "header:X-Run=run-47") == set()  # the whole value
    assert found(api, "-header:X-Run=run-4711 header:x-run") == names(mail, "shop")


def test_has_and_is(api: Api, mail: dict[str, str]) -> None:
    assert found(api, "has:attachment") == names(mail, "shop")
    assert found(api, "has:code") == names(mail, "bank")
    assert found(api, "has:link") == names(mail, "link")
    assert found(api, "-has:code -has:link -has:attachment") == names(mail, "tagged", "cc")
    assert found(api, "is:read") == names(mail, "bank", "shop")
    assert found(api, "is:unread") == names(mail, "link", "tagged", "cc")
    assert found(api, "-is:unread") == names(mail, "bank", "shop")
    assert found(api, "is:starred") == names(mail, "bank")
    assert found(api, "-is:starred is:read") == names(mail, "shop")


def test_before_and_after(api: Api, mail: dict[str, str]) -> None:
    assert found(api, "before:2026-01-11") == names(mail, "cc")
    assert found(api, "before:2026-01-10T12:00:00Z") == set()  # strictly before
    assert found(api, "after:2026-01-10T12:00:00+00:00") != set()
    assert mail["cc"] in found(api, "after:2026-01-10T12:00:00")  # at or after; no offset: UTC
    assert mail["cc"] in found(api, "after:2026-01-10T13:00:00+01:00")  # 12:00 UTC
    assert mail["cc"] not in found(api, "after:2026-01-10T12:00:01Z") | found(
        api, "after:2026-01-11"
    )
    assert found(api, "-before:2026-01-11") == names(mail, "bank", "shop", "link", "tagged")


def test_three_operators_and_negated_words(api: Api, mail: dict[str, str]) -> None:
    assert found(api, "warehouse -zeppelin is:unread") == names(mail, "tagged")
    assert found(api, '-"left our warehouse" warehouse') == names(mail, "tagged")
    assert found(api, "from:example -from:bank -from:shop -from:social -from:corp") == names(
        mail, "tagged"
    )


def test_per_inbox_list_takes_the_same_language(
    api: Api, mail: dict[str, str], inbox: Inbox, workspace: Workspace
) -> None:
    other = inbox_services.inbox_create(workspace=workspace, local_part="other")
    deliver(other, subject="Elsewhere", text="warehouse")
    path = f"inboxes/{inbox.pk}/emails"
    assert found(api, "warehouse -from:digest", path) == names(mail, "shop")


@pytest.mark.parametrize(
    ("query", "term", "position"),
    [
        ('ok "open', '"open', 3),
        ("ok has:nothing", "has:nothing", 3),
        ("before:soon", "before:soon", 0),
        ("x y label:nope", "label:nope", 4),
        ("inbox:inb_nothere", "inbox:inb_nothere", 0),
        ("-", "-", 0),
    ],
)
def test_malformed_queries_are_validation_errors_that_say_where(
    api: Api, mail: dict[str, str], query: str, term: str, position: int
) -> None:
    for path in ("emails", f"inboxes/{Email.objects.get(pk=mail['bank']).inbox_id}/emails"):
        response = api.call("GET", path, {"q": query})
        assert error_of(response) == (400, "validation_error")
        [issue] = response.json()["error"]["issues"]
        assert issue["path"] == "q"
        assert f"`{term}` at character {position}" in issue["message"]


def test_another_workspace_never_sees_mail_via_inbox(
    api: Api, other_api: Api, mail: dict[str, str], inbox: Inbox
) -> None:
    for ref in (inbox.pk, inbox.address):
        response = other_api.call("GET", "emails", {"q": f"inbox:{ref}"})
        assert error_of(response) == (400, "validation_error")
        assert "No inbox" in response.json()["error"]["issues"][0]["message"]
        response = other_api.call("GET", "emails", {"q": f"-inbox:{ref}"})
        assert error_of(response) == (400, "validation_error")
    assert found(other_api, "warehouse") == set()
    assert found(other_api, "from:bank") == set()
    assert found(api, f"inbox:{inbox.pk}") == set(mail.values())


def test_no_patterns_reach_the_database(api: Api, mail: dict[str, str]) -> None:
    """Regular-expression and LIKE wildcards are searched as the characters they are."""
    assert found(api, "ware.*house") == set()
    assert found(api, "ware%house") == set()
    assert found(api, "subject:_rder") == set()
    assert found(api, "from:%") == set()
    assert found(api, '"(a+)+$"') == set()
    assert found(api, '*** "%" \\') == set()  # no word for the full-text index either


def test_the_index_follows_deletes_and_new_mail(
    api: Api, mail: dict[str, str], inbox: Inbox
) -> None:
    assert api.call("DELETE", f"emails/{mail['shop']}").status_code == 200
    assert found(api, "parcel") == set()
    again = deliver(inbox, subject="Another", text=FILLER + "A second parcel is on its way.")
    assert found(api, "parcel") == {again}
    Email.objects.filter(inbox=inbox).delete()
    assert found(api, "parcel") == set() and found(api, "warehouse") == set()


# -- the dashboard's search box --------------------------------------------------------------


def test_dashboard_search_box_uses_the_query_language(
    client: Client, workspace: Workspace, inbox: Inbox, mail: dict[str, str]
) -> None:
    client.force_login(MembershipFactory(workspace=workspace, role="member").user)
    url = f"/inboxes/{inbox.pk}/"
    page = client.get(url, {"q": "warehouse -from:digest"}).content.decode()
    assert mail["shop"] in page and mail["tagged"] not in page and mail["bank"] not in page
    page = client.get(url, {"q": "has:code is:starred"}).content.decode()
    assert mail["bank"] in page and mail["shop"] not in page
    response = client.get(url, {"q": "has:nothing"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "`has:nothing` at character 0" in page and mail["bank"] not in page
