"""The sign-up flow end to end: the app mails a code, the test reads it from a Pigeonhole
inbox (the plugin's ``inbox`` fixture: fresh for this test, deleted after it)."""

from __future__ import annotations

import signup


def test_the_mailed_code_confirms_the_sign_up(inbox) -> None:
    signup.sign_up(inbox.address)
    code = inbox.wait_for_code(from_="signup.example", timeout=30)
    assert signup.confirm(inbox.address, code)


def test_a_wrong_code_does_not_confirm(inbox) -> None:
    signup.sign_up(inbox.address)
    email = inbox.wait(subject="sign-up code", timeout=30)
    assert email.code  # codes run from 100000: "000000" is never the one mailed
    assert not signup.confirm(inbox.address, "000000")
