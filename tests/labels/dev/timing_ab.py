"""CPU time per email and question of whichever ``labels`` package is first on the path, the way
the classification cost of issue 31 was compared across versions (docs/architecture.md, "Cost").

The first evaluation set's 287 emails (text only) x its six original questions: one zero-shot
answer and one with the first 5 positive + 5 negative examples by id, the model fitted once
(cached, as in a worker). Only APIs every version since 99fc823 has are used, so an old version
can be measured against a new one:

    git archive 99fc823 labels | tar -x -C /tmp/old
    cd /tmp && PYTHONPATH=/tmp/old:/path/to/worktree python /path/to/timing_ab.py 99fc823

Alternate the versions' runs and compare medians: the machine's load moves single runs by 10 %.
Prints ``label zero-shot-ms with-examples-ms total-ms``.
"""

import json
import sys
import time
from pathlib import Path

from labels.classifier.base import EmailFacts, Example
from labels.classifier.builtin import BuiltinBackend

DATA = Path(__file__).resolve().parents[1] / "data" / "classifier_eval.jsonl"
QUESTIONS = {
    "password_reset": "Is this a password reset email?",
    "signin_code": "Does this email contain a one-time sign-in or verification code?",
    "invoice_receipt": "Is this an invoice or a receipt?",
    "shipping": "Is this a shipping or delivery notice?",
    "newsletter_marketing": "Is this a newsletter or marketing email?",
    "security_alert": "Is this a security alert about the recipient's account?",
}


def main() -> None:
    rows = []
    for line in DATA.read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        email = EmailFacts(
            d["from_address"] or "", d["from_name"] or "", d["subject"] or "", d["text"] or ""
        )
        rows.append((d["id"], email, d["labels"]))
    rows.sort(key=lambda r: r[0])
    backend = BuiltinBackend()
    zero = few = 0.0
    count = 0
    for key, question in QUESTIONS.items():
        positives = [r[1] for r in rows if r[2][key]][:5]
        negatives = [r[1] for r in rows if not r[2][key]][:5]
        examples = [Example(e, True) for e in positives] + [Example(e, False) for e in negatives]
        backend.classify(question=question, email=rows[0][1], examples=examples)  # fit once
        for _, email, _ in rows:
            start = time.process_time()
            backend.classify(question=question, email=email)
            middle = time.process_time()
            backend.classify(question=question, email=email, examples=examples)
            zero += middle - start
            few += time.process_time() - middle
            count += 1
    label = sys.argv[1] if len(sys.argv) > 1 else "this"
    print(
        f"{label} {1000 * zero / count:.3f} {1000 * few / count:.3f} {1000 * (zero + few) / count:.3f}"
    )


if __name__ == "__main__":
    main()
