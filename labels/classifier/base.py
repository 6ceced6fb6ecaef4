"""The plain data classifier backends exchange (no Django models cross this line)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class EmailFacts:
    """What a classifier may read of an email."""

    from_address: str
    from_name: str
    subject: str
    text: str  # the text body, or the HTML rendered to text when there is none


class StoredEmail(Protocol):
    """What ``facts_of`` reads of a stored email (a ``mail.Email``; labels never import mail)."""

    from_address: str
    from_name: str
    subject: str

    @property
    def plain_text(self) -> str: ...


def facts_of(email: StoredEmail) -> EmailFacts:
    """The classifier's facts of a stored email: the one place they are built."""
    return EmailFacts(
        from_address=email.from_address,
        from_name=email.from_name,
        subject=email.subject,
        text=email.plain_text,
    )


@dataclass(frozen=True, slots=True)
class Example:
    """A labelled example from the workspace: ``positive`` is whether the label applies."""

    email: EmailFacts
    positive: bool


@dataclass(frozen=True, slots=True)
class Verdict:
    answer: bool  # yes/no to the question
    confidence: float  # in [0, 1]: how sure the backend is of ``answer``
    reason: str  # a short human-readable explanation


class Backend(Protocol):
    def classify(
        self, *, question: str, email: EmailFacts, examples: Sequence[Example] = ()
    ) -> Verdict: ...
