"""A deliberately failing test (run by the server's suite to check the plugin's report): the
code is checked against the wrong address, so the assertion fails and the report shows what the
inbox received."""

from __future__ import annotations

import signup


def test_the_code_confirms_someone_else(inbox) -> None:
    signup.sign_up(inbox.address)
    code = inbox.wait_for_code(timeout=30)
    assert signup.confirm("someone-else@signup.example", code)
