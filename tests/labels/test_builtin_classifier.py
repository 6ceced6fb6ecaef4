"""The built-in (offline, scikit-learn) classifier backend: zero-shot answers from the lexicon,
learning from a workspace's examples, and its quality on the dev sets in ``tests/labels/dev``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from labels.classifier import builtin
from labels.classifier.base import EmailFacts, Example, Verdict, signals_of
from labels.classifier.builtin import BuiltinBackend
from tests.labels.evaluate import load_emails, load_questions, score, split_examples

DEV = Path(__file__).parent / "dev"
QUESTIONS = load_questions(DEV / "questions.json")
PASSWORD_RESET = QUESTIONS["password_reset"]
SIGNIN_CODE = QUESTIONS["signin_code"]
INVOICE = QUESTIONS["invoice_receipt"]
SHIPPING = QUESTIONS["shipping"]
NEWSLETTER = QUESTIONS["newsletter_marketing"]
SECURITY = QUESTIONS["security_alert"]
CI = "Is this from our CI system?"


def mail(
    subject: str, text: str, sender: str = "noreply@service.test", name: str = ""
) -> EmailFacts:
    return EmailFacts(from_address=sender, from_name=name, subject=subject, text=text)


def ask(question: str, email: EmailFacts, examples: tuple[Example, ...] = ()) -> Verdict:
    return BuiltinBackend().classify(question=question, email=email, examples=examples)


@pytest.fixture(autouse=True)
def cold_caches() -> None:
    """Every test starts without cached analyses or models (nothing leaks between tests)."""
    builtin._ANALYSES.data.clear()
    builtin._MODELS.data.clear()


RESET = mail(
    "Reset your password",
    "Hi Ana,\n\nWe received a request to reset the password for your account. Click the link "
    "below to choose a new password:\n\nhttps://app.test/reset?t=abc\n\nIf you didn't request a "
    "password reset, you can ignore this email.",
)
CODE = mail(
    "Your verification code",
    "Your verification code is 738 201. It expires in 10 minutes. Don't share it with anyone.",
)
RECEIPT = mail(
    "Your receipt #2231-8812",
    "Thanks for your payment!\n\nAmount paid: $24.00\nDate paid: May 2, 2024\nPayment method: "
    "Visa ending in 4242",
    sender="receipts@shop.test",
)
SHIPPED = mail(
    "Your order has shipped",
    "Good news! Your package is on its way.\n\nCarrier: UPS\nTracking number: 1Z999AA10123456784"
    "\nEstimated delivery: Friday",
    sender="orders@shop.test",
)
NEWS = mail(
    "Summer sale: 40% off everything",
    "Our biggest sale of the year is here. Shop now and save 40% on everything.\n\n"
    "You're receiving this because you subscribed to our newsletter. Unsubscribe",
    sender="news@shop.test",
)
ALERT = mail(
    "Security alert: new sign-in from Chrome on Windows",
    "We noticed a new sign-in to your account from a device we don't recognize.\n\n"
    "Location: Lisbon, Portugal\n\nIf this was you, you can ignore this message. If not, "
    "secure your account now.",
)
PERSONAL = mail(
    "lunch tomorrow?",
    "Hey, are you free for lunch tomorrow around 12:30? The new ramen place is open.",
    sender="friend@mail.test",
    name="Sam",
)
PASSWORD_CHANGED = mail(
    "Your password was changed",
    "The password for your account was changed on May 8. If you made this change, you don't "
    "need to do anything. If you didn't, reset your password and secure your account.",
)
PROMO_CODE = mail(
    "Use code SAVE20 for 20% off",
    "Spring deals are here! Use code SAVE20 at checkout for 20% off your next order. Shop now.\n"
    "Unsubscribe",
    sender="deals@shop.test",
)
FREE_SHIPPING = mail(
    "Free shipping this weekend only",
    "Enjoy free shipping on all orders this weekend, no minimum. Shop the new arrivals now!\n"
    "Unsubscribe from marketing emails.",
    sender="hello@shop.test",
)
BOUNCE = mail(
    "Delivery Status Notification (Failure)",
    "Delivery to the following recipient failed permanently:\n\n  bob@nowhere.test\n\n"
    "The remote server returned: 550 5.1.1 user unknown",
    sender="mailer-daemon@mx.test",
    name="Mail Delivery Subsystem",
)

EVERYONE = (RESET, CODE, RECEIPT, SHIPPED, NEWS, ALERT, PERSONAL)


# -- zero-shot ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "yes", "no"),
    [
        (PASSWORD_RESET, [RESET], [CODE, RECEIPT, ALERT, PERSONAL, PASSWORD_CHANGED]),
        (SIGNIN_CODE, [CODE], [RESET, RECEIPT, SHIPPED, PROMO_CODE, ALERT, PERSONAL]),
        (INVOICE, [RECEIPT], [RESET, CODE, SHIPPED, NEWS, PERSONAL]),
        (SHIPPING, [SHIPPED], [RECEIPT, NEWS, FREE_SHIPPING, BOUNCE, PERSONAL]),
        (NEWSLETTER, [NEWS, PROMO_CODE, FREE_SHIPPING], [RESET, CODE, RECEIPT, SHIPPED, PERSONAL]),
        (SECURITY, [ALERT, PASSWORD_CHANGED], [RESET, CODE, RECEIPT, NEWS, PERSONAL]),
    ],
)
def test_zero_shot_obvious_emails(
    question: str, yes: list[EmailFacts], no: list[EmailFacts]
) -> None:
    for email in yes:
        verdict = ask(question, email)
        assert verdict.answer is True, (email.subject, verdict)
    for email in no:
        verdict = ask(question, email)
        assert verdict.answer is False, (email.subject, verdict)


def test_zero_shot_other_languages() -> None:
    reset_fr = mail(
        "Réinitialisation de votre mot de passe",
        "Bonjour, cliquez sur le lien ci-dessous pour réinitialiser votre mot de passe.",
    )
    shipped_de = mail(
        "Ihre Bestellung wurde versandt",
        "Ihr Paket ist unterwegs. Sendungsnummer: 00340434161094015902. Voraussichtliche "
        "Zustellung: Mittwoch.",
    )
    code_es = mail("Tu código de verificación", "Tu código de verificación es 204817.")
    assert ask(PASSWORD_RESET, reset_fr).answer is True
    assert ask(SHIPPING, shipped_de).answer is True
    assert ask(SIGNIN_CODE, code_es).answer is True
    assert ask(SHIPPING, reset_fr).answer is False


def test_conditional_boilerplate_does_not_make_a_reset() -> None:
    """ "If you didn't request this code, reset your password" is not a password reset."""
    code = mail(
        "Your login code",
        "Your login code is 551902.\n\nIf you didn't try to sign in, reset your password now.",
    )
    assert ask(PASSWORD_RESET, code).answer is False
    assert ask(SIGNIN_CODE, code).answer is True


def test_confident_when_evidence_is_strong() -> None:
    assert ask(PASSWORD_RESET, RESET).confidence > 0.9
    assert ask(PASSWORD_RESET, PERSONAL).confidence > 0.9  # sure that it is no reset


def test_reason_says_what_matched() -> None:
    reason = ask(PASSWORD_RESET, RESET).reason
    assert "reset" in reason and "password" in reason and "subject" in reason
    assert "score" in reason


def test_negated_question() -> None:
    assert ask("Is this not a newsletter?", NEWS).answer is False
    assert ask("Is this not a newsletter?", RESET).answer is True


def test_question_outside_the_lexicon_uses_its_words() -> None:
    email = mail("Your Kubernetes cluster upgrade", "The kubernetes cluster prod-1 was upgraded.")
    assert ask("Is this about Kubernetes?", email).answer is True
    assert ask("Is this about Kubernetes?", RECEIPT).answer is False


@pytest.mark.parametrize(
    "question",
    [PASSWORD_RESET, NEWSLETTER, CI, "Is this?", "", "¿Es una factura?", "Ist das eine Rechnung?"],
)
@pytest.mark.parametrize(
    "email",
    [*EVERYONE, mail("", ""), EmailFacts("", "", "Привет", "Ваш код подтверждения: 551902")],
)
def test_confidence_is_that_of_the_answer(question: str, email: EmailFacts) -> None:
    verdict = ask(question, email)
    assert isinstance(verdict.answer, bool)
    assert 0.5 <= verdict.confidence <= 1.0
    assert verdict.reason


def test_foreign_language_questions() -> None:
    assert ask("¿Es una factura?", RECEIPT).answer is True
    assert ask("Ist das eine Rechnung?", SHIPPED).answer is False


# -- determinism and caching --------------------------------------------------------------------


def test_deterministic() -> None:
    examples = (
        Example(RESET, True),
        Example(PASSWORD_CHANGED, True),
        Example(NEWS, False),
        Example(RECEIPT, False),
    )
    calls = [(q, e, ex) for q in (PASSWORD_RESET, CI) for e in EVERYONE for ex in ((), examples)]
    first = [ask(q, e, ex) for q, e, ex in calls]
    builtin._ANALYSES.data.clear()
    builtin._MODELS.data.clear()
    again = {i: ask(*calls[i]) for i in reversed(range(len(calls)))}  # cold, in another order
    assert first == [again[i] for i in range(len(calls))]
    assert first == [ask(q, e, ex) for q, e, ex in calls]  # warm


def test_a_batch_with_the_same_examples_fits_once(monkeypatch: pytest.MonkeyPatch) -> None:
    fits = []
    real_fit = builtin.fit
    monkeypatch.setattr(builtin, "fit", lambda q, ex: fits.append(q) or real_fit(q, ex))
    examples = (Example(RESET, True), Example(NEWS, False))
    for email in EVERYONE:
        ask(PASSWORD_RESET, email, examples)
    assert len(fits) == 1
    ask(PASSWORD_RESET, RESET, (Example(RESET, True), Example(NEWS, True)))  # other labels
    ask(SECURITY, RESET, examples)  # another question
    assert len(fits) == 3


def test_pure_python_tfidf_matches_scikit_learn() -> None:
    docs = [" ".join(builtin.documents(e)) for e in EVERYONE]
    vectorizer = TfidfVectorizer(
        analyzer="word",
        token_pattern=r"[^ |]+",
        lowercase=False,
        ngram_range=(1, 2),
        sublinear_tf=True,
    )
    vectorizer.fit(docs[:4])
    weights = np.sin(np.arange(len(vectorizer.vocabulary_)))  # any weights
    field = builtin.FieldModel(
        vectorizer.build_analyzer(),
        {
            t: (float(vectorizer.idf_[j]), float(weights[j]))
            for t, j in vectorizer.vocabulary_.items()
        },
    )
    for doc in docs:
        expected = float((vectorizer.transform([doc]) @ weights)[0])
        assert field.score(doc) == pytest.approx(expected, abs=1e-9)


# -- learning from examples ---------------------------------------------------------------------


def jenkins(subject: str, text: str) -> EmailFacts:
    return mail(subject, text, sender="jenkins@build01.acme.test", name="Jenkins")


BUILDS = [
    jenkins(
        "Build #1841 FAILURE: acme-api/main",
        "Job acme-api/main #1841 finished with FAILURE. Stage: test. Console output: https://build01.acme.test/job/acme-api/1841/console",
    ),
    jenkins(
        "Build #1842 SUCCESS: acme-api/main",
        "Job acme-api/main #1842 finished with SUCCESS in 6 min 12 s. Changes: Bump dependencies (ravi)",
    ),
    jenkins(
        "Build #77 UNSTABLE: acme-web/nightly",
        "Job acme-web/nightly #77 finished with UNSTABLE: 3 tests failed. Console output: https://build01.acme.test/job/acme-web/77/console",
    ),
    jenkins(
        "Build #1850 FIXED: acme-api/feature-login",
        "Job acme-api/feature-login #1850 is back to normal. Stage: deploy-staging",
    ),
    jenkins(
        "Build #412 ABORTED: acme-infra/terraform-plan",
        "Job acme-infra/terraform-plan #412 was aborted by timeout after 60 min.",
    ),
    jenkins(
        "Build #1901 FAILURE: acme-api/release-2.4",
        "Job acme-api/release-2.4 #1901 finished with FAILURE. Stage: lint. Console output: https://build01.acme.test/job/acme-api/1901/console",
    ),
    jenkins(
        "Build #78 SUCCESS: acme-web/nightly",
        "Job acme-web/nightly #78 finished with SUCCESS in 41 min. Changes: none",
    ),
    jenkins(
        "Build #413 SUCCESS: acme-infra/terraform-plan",
        "Job acme-infra/terraform-plan #413 finished with SUCCESS. Plan: 2 to add, 0 to change, 0 to destroy.",
    ),
]
NOT_BUILDS = [
    mail(
        "Team offsite agenda",
        "Hi all, attached is the agenda for Thursday's offsite. Lunch at 12.",
        "maria@acme.test",
        "Maria",
    ),
    mail(
        "Your receipt from Figma",
        "Amount paid $45.00. Payment method Visa 4242.",
        "billing@figma.test",
    ),
    mail(
        "The Weekly Byte #113",
        "This week: Rust, SQLite and more. Read more. Unsubscribe",
        "news@weeklybyte.test",
    ),
    mail(
        "Re: release notes for 2.4",
        "Looks good, can you add the migration note before we ship it?",
        "ravi@acme.test",
        "Ravi",
    ),
    mail(
        "Your package is on its way",
        "Tracking number 1Z999AA10123456784, arriving Friday.",
        "orders@shop.test",
    ),
    RESET,
    mail(
        "Invitation: Sprint review @ Fri 15:00",
        "You have been invited to Sprint review. Join with Google Meet.",
        "calendar@acme.test",
    ),
    mail(
        "Quarterly numbers",
        "Revenue is up 8% on plan; please review the deck before Thursday.",
        "cfo@acme.test",
        "Henrik",
    ),
    NEWS,
    mail(
        "Dinner?",
        "Free on Saturday for dinner? Thinking of the Georgian place.",
        "tom@mail.test",
        "Tom",
    ),
]


def accuracy(question: str, cases: list[tuple[EmailFacts, bool]], examples=()) -> float:  # type: ignore[no-untyped-def]
    right = sum(ask(question, e, tuple(examples)).answer == y for e, y in cases)
    return right / len(cases)


def test_learns_a_label_the_lexicon_knows_nothing_about() -> None:
    examples = [Example(e, True) for e in BUILDS[:5]] + [Example(e, False) for e in NOT_BUILDS[:5]]
    held_out = [(e, True) for e in BUILDS[5:]] + [(e, False) for e in NOT_BUILDS[5:]]
    assert accuracy(CI, held_out) < 0.7  # zero-shot it cannot know what our CI sends
    assert accuracy(CI, held_out, examples) == 1.0
    verdict = ask(CI, BUILDS[6], tuple(examples))
    assert verdict.answer is True and "learned from 5 yes / 5 no" in verdict.reason


def test_learns_from_positives_only() -> None:
    examples = [Example(e, True) for e in BUILDS[:5]]
    assert all(ask(CI, e, tuple(examples)).answer for e in BUILDS[5:])
    assert not any(ask(CI, e, tuple(examples)).answer for e in NOT_BUILDS)


def test_learns_from_negatives_only() -> None:
    # the workspace does not count GitHub-style notifications with an unsubscribe footer
    notifications = [
        mail(
            f"Re: [acme/api] {title} (#{n})",
            f"{who} commented on this pull request. {text}\n\nReply to this email directly or unsubscribe.",
            "notifications@git.test",
            who,
        )
        for n, (title, who, text) in enumerate(
            [
                ("Fix flaky test", "jin", "Can we add a retry here?"),
                ("Add rate limiting", "ana", "Looks good to me, merging after CI."),
                ("Bump Django", "ravi", "Changelog says nothing breaking."),
                ("Speed up search", "mia", "Nice, 3x faster on my machine."),
            ],
            start=100,
        )
    ]
    examples = tuple(Example(e, False) for e in notifications[:3])
    new_notification = notifications[3]
    assert ask(NEWSLETTER, new_notification, examples).answer is False
    assert ask(NEWSLETTER, NEWS, examples).answer is True  # the prior still speaks for the rest
    assert ask(NEWSLETTER, RESET, examples).answer is False
    # a label with no positive example and no lexicon: nothing is a yes
    only_no = tuple(Example(e, False) for e in NOT_BUILDS[:5])
    assert not any(ask(CI, e, only_no).answer for e in NOT_BUILDS[5:])


def test_examples_correct_a_prior_that_disagrees_with_the_workspace() -> None:
    """This workspace counts order confirmations (with a total) as shipping notices."""

    def confirmation(n: int, item: str, total: str) -> EmailFacts:
        return mail(
            f"Order confirmation #{n}",
            f"Thanks for your order #{n}! {item}. Order total {total}. We'll send you another "
            "email when it's on its way.",
            "orders@shop.test",
        )

    confirmations = [
        confirmation(1001, "1 × desk lamp", "$39.00"),
        confirmation(1002, "2 × coffee mugs", "$18.50"),
        confirmation(1003, "1 × rain jacket", "$89.00"),
        confirmation(1004, "3 × notebooks", "$12.00"),
    ]
    examples = tuple(
        [Example(e, True) for e in [*confirmations[:3], SHIPPED]]
        + [Example(e, False) for e in (RECEIPT, NEWS, RESET, PERSONAL)]
    )
    assert ask(SHIPPING, confirmations[3]).answer is False
    assert ask(SHIPPING, confirmations[3], examples).answer is True
    other_receipt = mail("Your receipt", "Amount paid $5.00. Thanks for your payment.")
    assert ask(SHIPPING, other_receipt, examples).answer is False


# -- quality on the dev sets (accuracy thresholds, not timings) -------------------------------


@pytest.mark.parametrize("key", list(QUESTIONS))
def test_dev_set_accuracy(key: str) -> None:
    rows = load_emails(DEV / "dev_emails.jsonl")
    backend = BuiltinBackend()
    zero, errors = score(backend, QUESTIONS[key], key, rows)
    assert zero.accuracy >= 0.9, errors
    examples, rest = split_examples(rows, key)
    assert len(examples) == 10
    few, errors = score(backend, QUESTIONS[key], key, rest, examples)
    assert few.accuracy >= 0.95, errors


@pytest.mark.parametrize("key", list(QUESTIONS))
def test_all_dev_sets_accuracy(key: str) -> None:
    """The dev set, a validation set in other styles and a set of hard cases, together."""
    rows = [
        r
        for name in ("dev_emails", "validation", "hard")
        for r in load_emails(DEV / f"{name}.jsonl")
    ]
    backend = BuiltinBackend()
    zero, errors = score(backend, QUESTIONS[key], key, rows)
    assert zero.accuracy >= 0.9, errors
    examples, rest = split_examples(rows, key)
    few, errors = score(backend, QUESTIONS[key], key, rest, examples)
    assert few.accuracy >= 0.95, errors


# -- written by a person: the letter's shape and the list headers (issue 31) --------------------

PERSON = "Is this a message written by a person (personal or work), not sent by a system?"


def test_a_letter_from_a_business_address_is_a_persons() -> None:
    """Without headers, a letter that greets the reader by name and closes with its writer's
    name is a person's, even from a firm's address and about a quote; the same notice that greets
    nobody in particular and closes with the firm's team is a system's."""
    letter = mail(
        "Angebot Badsanierung",
        "Sehr geehrter Herr Lindner,\n\nwie am Telefon besprochen sende ich Ihnen anbei unser "
        "Angebot für die Sanierung Ihres Badezimmers. Ich habe die Fliesen aus dem Muster "
        "eingeplant, das Ihnen gefallen hat.\n\nMit freundlichen Grüßen\nMartin Vogel",
        sender="info@vogel-fliesen.example",
        name="Vogel Fliesen GmbH",
    )
    notice = mail(
        "Ihr Angebot",
        "Sehr geehrte Kundin, sehr geehrter Kunde,\n\nanbei erhalten Sie Ihr Angebot für die "
        "Sanierung Ihres Badezimmers.\n\nMit freundlichen Grüßen\nIhr Vogel Fliesen Team",
        sender="info@vogel-fliesen.example",
        name="Vogel Fliesen GmbH",
    )
    assert ask(PERSON, letter).answer is True
    assert ask(PERSON, notice).answer is False
    assert ask("Is this an automated email?", notice).answer is True


def test_a_close_with_a_name_is_a_persons_and_one_with_a_brand_or_a_label_is_not() -> None:
    meta = builtin._meta
    signed = mail("x", "Hola Lucía:\n\nTe paso los horarios.\n\nUn abrazo,\nPablo Ortega")
    assert meta(signed)["<signoff>"] and meta(signed)["<letter>"]
    family = mail("x", "Dear Tom,\n\nI have posted your present, I hope it fits.\n\nYour mum")
    assert meta(family)["<letter>"] and meta(family)["<closing>"]
    for close in ("The Brewly crew", "Courier: Teo", "Gute Fahrt!", "Unsubscribe", "De Winkel"):
        notice = mail("x", f"Hi Tom,\n\nYour order is on its way.\n\n{close}")
        assert not meta(notice)["<letter>"], close
    brand = mail("x", "Dear Ms Hale,\n\nYour policy renews on 1 May.\n\nHalden Insurance")
    brand = EmailFacts("billing@haldeninsurance.example", "Halden", "x", brand.text)
    assert not meta(brand)["<letter>"]


def test_a_senders_name_with_a_role_in_it_is_no_persons() -> None:
    team = mail(
        "Pick a delivery slot",
        "Hi Ben,\n\nYour table is at our depot. Pick a slot for delivery.\n\nDelivery Team",
        sender="delivery@oakhome.example",
        name="Oakhome Delivery Team",
    )
    assert not builtin._meta(team)["<named>"]
    assert not builtin._meta(team)["<signed>"]


def test_an_auto_reply_is_automated() -> None:
    away = mail(
        "Automatic reply: budget review",
        "Thank you for your message. I am out of the office until 3 June and will reply when I "
        "am back.\n\nBest regards,\nNora Lind",
        sender="nora.lind@fjord.example",
        name="Nora Lind",
    )
    assert ask(PERSON, away).answer is False


def test_precedence_list_is_the_list_signal_and_a_list_post_a_persons() -> None:
    """A list server marks its posts "Precedence: list": the same fact as List-Id (a person may
    write through it), not bulk mail."""
    assert signals_of([["Precedence", "list"]], has_text=False) == {"list"}
    assert signals_of([["Precedence", "bulk"]], has_text=False) == {"bulk"}
    post = EmailFacts(
        from_address="infra@lists.example.org",
        from_name="Ola Berg",
        subject="Re: [infra] moving the runners",
        text="I'd wait until the new disks arrive; I can do the move on Thursday.\n\nOla\n\n"
        "On Mon, Kim wrote:\n> Shall we move the runners this week?",
        signals=signals_of(
            [
                ["List-Id", "<infra.lists.example.org>"],
                ["List-Unsubscribe", "<mailto:infra-leave@lists.example.org>"],
                ["Precedence", "list"],
                ["User-Agent", "Mozilla Thunderbird 128.0"],
            ],
            in_reply_to="<k@example.org>",
        ),
    )
    assert ask(PERSON, post).answer is True


def test_examples_of_bulk_mail_outweigh_a_prior_that_misses_its_words() -> None:
    """Five mailings whose words the lexicon does not tie to newsletters teach "a system sent this
    to many" (read from headers, sender and shape, each mailing showing it differently), which
    carries to a sixth that shares neither their words nor their headers."""

    def bulk(sender: str, subject: str, text: str, header: str, value: str = "x") -> EmailFacts:
        return EmailFacts(
            from_address=sender,
            from_name=sender.partition("@")[2].split(".")[0].title(),
            subject=subject,
            text=text,
            signals=signals_of([[header, value]], has_html=True, has_text=True),
        )

    def letter(sender: str, name: str, subject: str, text: str) -> EmailFacts:
        return EmailFacts(from_address=sender, from_name=name, subject=subject, text=text)

    mailings = [
        bulk(
            "hello@kilnworks.test",
            "Inside the kiln: glazes we tried",
            "Three glazes came out of the kiln looking nothing like the test tiles. Photos: "
            "https://kilnworks.test/glaze",
            "List-Unsubscribe",
        ),
        bulk(
            "studio@fernhouse.test",
            "Repotting season is here",
            "Roots poking out of the pot? A step-by-step guide: https://fernhouse.test/repot",
            "X-Mailgun-Sid",
        ),
        bulk(
            "crew@trailmix.test",
            "Ten trails for foggy mornings",
            "Our crew picked ten trails that look best in fog. Maps: https://trailmix.test/fog",
            "List-Unsubscribe",
        ),
        bulk(
            "info@inkwell.test",
            "The fountain pen issue",
            "Nibs, inks and the paper that holds them: https://inkwell.test/pens",
            "X-SG-EID",
        ),
        bulk(
            "team@sourdough.test",
            "Starter troubleshooting, part 2",
            "Flat loaves? Sleepy starter? Part two of our guide: https://sourdough.test/starter",
            "X-Mailgun-Sid",
        ),
    ]
    letters = [
        letter(
            "marta.ruiz@mail.test",
            "Marta Ruiz",
            "Dinner on Friday?",
            "Hi Jo,\n\nAre you free on Friday? I found a place near the river.\n\nMarta",
        ),
        letter(
            "p.okafor@work.test",
            "Peter Okafor",
            "Slides for Monday",
            "Hi Jo,\n\nI moved the budget slide to the end, I think it reads better.\n\n"
            "Thanks,\nPeter",
        ),
        letter(
            "liam.g@mail.test",
            "Liam Gray",
            "the bike",
            "Jo,\n\nI left the bike in your shed, the lock code is the usual.\n\nLiam",
        ),
        letter(
            "anna.berg@work.test",
            "Anna Berg",
            "Re: contract",
            "Hi Jo,\n\nI read it twice and I'm happy with clause 4 now.\n\nBest,\nAnna",
        ),
        letter(
            "sam.ito@mail.test",
            "Sam Ito",
            "photos",
            "Hi Jo,\n\nHere are the photos from the weekend, I like the third one best.\n\nSam",
        ),
    ]
    examples = tuple([Example(e, True) for e in mailings] + [Example(e, False) for e in letters])
    another = bulk(
        "weaving@loomhall.test",
        "Leftover yarn, new rug",
        "A basket of odds and ends became a rug, and this is how we wove it.",
        "Precedence",
        "bulk",
    )
    assert ask(NEWSLETTER, another).answer is False  # no word of the lexicon's newsletters
    assert ask(NEWSLETTER, another, examples).answer is True
    a_letter = letter(
        "nina.holt@mail.test",
        "Nina Holt",
        "yarn",
        "Hi Jo,\n\nI have a basket of leftover yarn, do you want it for the rug?\n\nNina",
    )
    assert ask(NEWSLETTER, a_letter, examples).answer is False
