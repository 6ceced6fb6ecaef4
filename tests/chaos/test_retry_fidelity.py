"""Retry schedule fidelity: 6 attempts on the schedule then ``failed`` (injectable clock), a
total 10 s deadline (real clock), redirects never followed (small size; ``make chaos`` runs the
large one)."""

from __future__ import annotations

from tests.chaos import retry_fidelity


def test_schedule_deadline_and_redirects(transactional_db: None) -> None:
    from django.db import connection

    figures = retry_fidelity.run(connection.settings_dict["NAME"], failing=10, slow=2, redirected=5)
    print({k: v for k, v in figures.__dict__.items() if k != "details"})
    details = figures.details[:20]
    assert figures.attempts == {6: 10}, details
    assert figures.requests_seen == 60, figures
    assert figures.early_claims == figures.late_claims == 0, details
    assert figures.gaps == 50 and figures.gaps_out_of_band == 0, details
    assert figures.wrong_final == 0, details
    assert figures.timeouts_logged == figures.timeouts_in_band == 4, details
    assert figures.redirect_attempts == figures.redirect_failures_logged == 30, details
    assert figures.redirect_target_hits == 0, figures
    assert not details, details
