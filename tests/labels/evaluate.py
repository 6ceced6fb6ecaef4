"""Accuracy of the built-in classifier on a labelled set of emails, as a Markdown table.

    python -m tests.labels.evaluate [emails.jsonl[,more.jsonl]] [questions.json] [--errors]
        [--timing]

``emails.jsonl`` holds one email a line: ``{"id", "from_address", "from_name", "subject", "text",
"labels": {key: bool}}`` and optionally what the stored email would carry besides: ``headers``
(``[[name, value], ...]``), ``in_reply_to``, ``html`` (true when it has an HTML part) and
``attachments`` (true when it has some); their structural signals are read by the same
``signals_of`` as ``facts_of`` uses for stored mail. An email without a key in ``labels`` is not
scored for that key. ``questions.json`` maps each label key to its yes/no question (either
``{key: question}`` or a list of ``{"key": ..., "question": ...}``); several keys may share
a label (``"person_2": ...``) to score other wordings.

Per question it reports accuracy, precision and recall zero-shot (on every email) and after
learning from 5 positive + 5 negative examples, which are then left out of the scoring. The
examples are drawn at random from the set's positives and negatives, as a user would pick a few
of their own emails, with fixed seeds (``DRAWS``: 1 to 5) so that the figures are reproducible;
the "5+5" columns pool the answers of the five draws (``n`` is per draw). One draw can be lucky
or unlucky (the first five by id were a lucky one for newsletters), so the table does not rest on
one. ``--first`` scores the first five of each by id instead (the table before 2026-11-27).
The examples take the path of ``POST /labels/{key}/examples``: each becomes the stored example
row that ``labels.selectors.examples_for`` reads back (``example_round_trip``), and
``tests/labels/test_evaluation_path.py`` checks that the endpoint and this script give the same
answers. ``--errors`` lists the emails it gets wrong; ``--timing`` the CPU time per email.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from labels.classifier.base import EmailFacts, Example, signals_of
from labels.classifier.builtin import BuiltinBackend

DEFAULT_EMAILS = (
    Path("tests/labels/data/classifier_eval.jsonl"),
    Path("tests/labels/data/classifier_eval_people.jsonl"),
)
DEFAULT_QUESTIONS = Path("tests/labels/data/questions.json")
SHOTS = 5
DRAWS = (1, 2, 3, 4, 5)  # seeds of the example draws the 5+5 columns pool


@dataclass(frozen=True)
class Row:
    id: str
    email: EmailFacts
    labels: dict[str, bool]


def load_emails(path: Path) -> list[Row]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        data = json.loads(line)
        labels = data.get("labels", {})
        if isinstance(labels, list):  # the keys that apply
            labels = {key: True for key in labels}
        rows.append(
            Row(
                id=str(data.get("id", n)),
                email=EmailFacts(
                    from_address=data.get("from_address") or "",
                    from_name=data.get("from_name") or "",
                    subject=data.get("subject") or "",
                    text=data.get("text") or "",
                    # Unknown without headers (as for POST /labels/test with from/subject/text).
                    signals=signals_of(
                        data["headers"],
                        in_reply_to=data.get("in_reply_to") or "",
                        has_html=bool(data.get("html")),
                        has_text=bool(data.get("text")),
                        has_attachments=bool(data.get("attachments")),
                    )
                    if "headers" in data
                    else frozenset(),
                ),
                labels={str(k): bool(v) for k, v in labels.items()},
            )
        )
    return rows


def load_questions(path: Path) -> dict[str, str]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict) and isinstance(data.get("questions"), list | dict):
        data = data["questions"]
    if isinstance(data, dict):
        return {str(k): str(v) for k, v in data.items()}
    return {str(item["key"]): str(item["question"]) for item in data}


@dataclass
class Score:
    n: int = 0
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0
    draws: int = 1  # the example draws pooled in it

    def merge(self, other: Score) -> None:
        self.n += other.n
        self.tp += other.tp
        self.fp += other.fp
        self.fn += other.fn
        self.tn += other.tn
        self.draws += other.draws

    def add(self, predicted: bool, actual: bool) -> None:
        self.n += 1
        if predicted and actual:
            self.tp += 1
        elif predicted:
            self.fp += 1
        elif actual:
            self.fn += 1
        else:
            self.tn += 1

    @property
    def accuracy(self) -> float:
        return (self.tp + self.tn) / self.n if self.n else float("nan")

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else float("nan")

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else float("nan")


def label_of(key: str) -> str:
    """The label a question key scores: ``person@2`` is another wording for ``person``, and
    ``not_person`` asks the opposite (its answer is the label's negation)."""
    return key.split("@", 1)[0].removeprefix("not_")


def truth(row: Row, key: str) -> bool:
    return row.labels[label_of(key)] != key.startswith("not_")


def example_round_trip(email: EmailFacts, positive: bool) -> Example:
    """An example as ``POST /labels/{key}/examples`` stores it and ``examples_for`` reads it
    back: the copied fields are capped as ``labels.services`` caps them."""
    return Example(
        email=EmailFacts(
            from_address=email.from_address[:320],
            from_name=email.from_name[:320],
            subject=email.subject,
            text=email.text[:20_000],
            signals=frozenset(sorted(email.signals)),
        ),
        positive=positive,
    )


def split_examples(
    rows: Sequence[Row], key: str, shots: int = SHOTS, seed: int | None = None
) -> tuple[list[Example], list[Row]]:
    """``shots`` positives and negatives as examples, and the rest: the first by id, or with a
    ``seed`` a random draw (``random.Random(seed)``, the same on every machine)."""
    ordered = sorted((r for r in rows if label_of(key) in r.labels), key=lambda r: r.id)
    positives = [r for r in ordered if truth(r, key)]
    negatives = [r for r in ordered if not truth(r, key)]
    if seed is None:
        positives, negatives = positives[:shots], negatives[:shots]
    else:
        draw = random.Random(seed)
        positives = sorted(draw.sample(positives, min(shots, len(positives))), key=lambda r: r.id)
        negatives = sorted(draw.sample(negatives, min(shots, len(negatives))), key=lambda r: r.id)
    chosen = {r.id for r in (*positives, *negatives)}
    examples = [example_round_trip(r.email, truth(r, key)) for r in (*positives, *negatives)]
    return examples, [r for r in ordered if r.id not in chosen]


def score(
    backend: BuiltinBackend,
    question: str,
    key: str,
    rows: Iterable[Row],
    examples: Sequence[Example] = (),
) -> tuple[Score, list[str]]:
    result, errors = Score(), []
    for row in rows:
        if label_of(key) not in row.labels:
            continue
        verdict = backend.classify(question=question, email=row.email, examples=examples)
        actual = truth(row, key)
        result.add(verdict.answer, actual)
        if verdict.answer != actual:
            errors.append(
                f"{row.id} expected {actual} got {verdict.answer} "
                f"({verdict.confidence:.2f}): {row.email.subject[:60]!r} — {verdict.reason}"
            )
    return result, errors


def evaluate(
    rows: Sequence[Row], questions: dict[str, str], draws: Sequence[int | None] = DRAWS
) -> dict[str, tuple[Score, Score]]:
    """Zero-shot and 5+5 scores per question; the 5+5 score pools the ``draws``."""
    backend = BuiltinBackend()
    out = {}
    for key, question in questions.items():
        zero, _ = score(backend, question, key, rows)
        few = Score(draws=0)
        for seed in draws:
            examples, rest = split_examples(rows, key, seed=seed)
            one, _ = score(backend, question, key, rest, examples)
            few.merge(one)
        out[key] = (zero, few)
    return out


def _pct(value: float) -> str:
    return "–" if value != value else f"{100 * value:.1f}"  # NaN: no such case


def table(results: dict[str, tuple[Score, Score]], questions: dict[str, str]) -> str:
    lines = [
        "| label | question | n | zero-shot acc | prec | rec | n (5+5) | 5+5 acc | prec | rec |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, (zero, few) in results.items():
        lines.append(
            f"| {key} | {questions[key]} | {zero.n} | {_pct(zero.accuracy)} | "
            f"{_pct(zero.precision)} | {_pct(zero.recall)} | {few.n // few.draws} | {_pct(few.accuracy)} | "
            f"{_pct(few.precision)} | {_pct(few.recall)} |"
        )
    zeros = [z for z, _ in results.values()]
    fews = [f for _, f in results.values()]
    if zeros:
        mean_zero = sum(z.accuracy for z in zeros) / len(zeros)
        mean_few = sum(f.accuracy for f in fews) / len(fews)
        lines.append(f"| **mean** | | | **{_pct(mean_zero)}** | | | | **{_pct(mean_few)}** | | |")
    return "\n".join(lines)


def timing(rows: Sequence[Row], questions: dict[str, str]) -> tuple[float, float]:
    """CPU seconds per email and question, zero-shot and with 5+5 examples (fitted models and
    analyses are cached as in a server process: this is the steady cost of one more email)."""
    backend = BuiltinBackend()
    zero_cpu = few_cpu = 0.0
    count = 0
    for key, question in questions.items():
        examples, _ = split_examples(rows, key)
        backend.classify(question=question, email=rows[0].email, examples=examples)  # fit once
        for row in rows:
            start = time.process_time()
            backend.classify(question=question, email=row.email)
            middle = time.process_time()
            backend.classify(question=question, email=row.email, examples=examples)
            zero_cpu += middle - start
            few_cpu += time.process_time() - middle
            count += 1
    return zero_cpu / count, few_cpu / count


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "emails",
        nargs="?",
        type=lambda value: [Path(p) for p in value.split(",")],
        default=list(DEFAULT_EMAILS),
    )
    parser.add_argument("questions", nargs="?", type=Path, default=DEFAULT_QUESTIONS)
    parser.add_argument("--errors", action="store_true", help="list the misclassified emails")
    parser.add_argument("--timing", action="store_true", help="CPU time per email and question")
    parser.add_argument(
        "--first", action="store_true", help="5+5: the first examples by id, not random draws"
    )
    args = parser.parse_args(argv)
    draws: tuple[int | None, ...] = (None,) if args.first else DRAWS
    for path in (*args.emails, args.questions):
        if not path.is_file():
            parser.error(f"{path} does not exist")
    rows = [row for path in args.emails for row in load_emails(path)]
    questions = load_questions(args.questions)
    names = ", ".join(str(p) for p in args.emails)
    print(f"{len(rows)} emails from {names}, {len(questions)} questions\n")
    print(table(evaluate(rows, questions, draws), questions))
    command = " ".join(
        ["python -m tests.labels.evaluate", *(argv if argv is not None else sys.argv[1:])]
    )
    print(f"\n(`{command}`, commit {_commit()}, {date.today().isoformat()})")
    if args.timing:
        zero, few = timing(rows, questions)
        print(
            f"\nCPU time per email and question: {1000 * zero:.3f} ms zero-shot, "
            f"{1000 * few:.3f} ms with 5+5 examples"
        )
    if args.errors:
        backend = BuiltinBackend()
        for key, question in questions.items():
            _, zero_errors = score(backend, question, key, rows)
            examples, rest = split_examples(rows, key, seed=draws[0])
            _, few_errors = score(backend, question, key, rest, examples)
            print(f"\n### {key}: zero-shot errors ({len(zero_errors)})")
            print("\n".join(f"- {e}" for e in zero_errors))
            which = "the first by id" if draws[0] is None else f"draw {draws[0]}"
            print(f"\n### {key}: errors after 5+5 examples ({which}: {len(few_errors)})")
            print("\n".join(f"- {e}" for e in few_errors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
