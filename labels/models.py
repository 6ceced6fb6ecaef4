"""Labels of a workspace and the labels applied to emails.

``EmailLabel`` refers to ``mail.Email`` by string: labels never import mail.
"""

from __future__ import annotations

from django.db import models

from config.api.ids import new_id
from config.tenancy import Tenancy, TenantManager


def _lbl_id() -> str:
    return new_id("lbl")


def _lex_id() -> str:
    return new_id("lex")


class Color(models.TextChoices):
    VIOLET = "violet"
    SKY = "sky"
    EMERALD = "emerald"
    AMBER = "amber"
    ROSE = "rose"
    FUCHSIA = "fuchsia"
    LIME = "lime"
    ORANGE = "orange"
    SLATE = "slate"
    CYAN = "cyan"


class Label(models.Model):
    id = models.CharField(primary_key=True, max_length=32, default=_lbl_id, editable=False)
    workspace = models.ForeignKey(
        "apikeys.Workspace", on_delete=models.CASCADE, related_name="labels"
    )
    key = models.CharField(max_length=63)
    name = models.CharField(max_length=200)
    color = models.CharField(max_length=10, choices=Color.choices, default=Color.VIOLET)
    instructions = models.TextField(blank=True, default="")
    threshold = models.FloatField(default=0.7)
    rules = models.JSONField(default=dict, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantManager()
    tenancy = Tenancy("workspace")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "key"], name="label_key_unique")
        ]

    def __str__(self) -> str:
        return self.key


class LabelSource(models.TextChoices):
    RULE = "rule"
    CLASSIFIER = "classifier"
    MANUAL = "manual"


class EmailLabel(models.Model):
    """A label on an email. ``key`` repeats the label's (immutable) key so lists need no join."""

    # No index of its own: email_label_unique leads with it.
    email = models.ForeignKey(
        "mail.Email", on_delete=models.CASCADE, related_name="email_labels", db_index=False
    )
    label = models.ForeignKey(Label, on_delete=models.CASCADE, related_name="applications")
    key = models.CharField(max_length=63)
    source = models.CharField(max_length=12, choices=LabelSource.choices)
    confidence = models.FloatField(default=1.0)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()
    tenancy = Tenancy(
        "email__workspace",
        "label__workspace",
        parents=(
            "email",
            "label",
        ),
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["email", "label"], name="email_label_unique")
        ]
        indexes = [
            # ?label= on email lists: emails carrying a key.
            models.Index(fields=["key", "email"], name="emaillabel_key"),
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.source})"


class FeedbackSource(models.TextChoices):
    LABEL = "label"  # a person put the label on the email
    REMOVAL = "removal"  # a person took the classifier's label off
    EXAMPLE = "example"  # POST /labels/{key}/examples (or the dashboard's yes / no buttons)


class LabelFeedback(models.Model):
    """A person's decision about a label on an email, kept as a training example.

    A manual label is a positive example; removing a classifier's label is a negative one; an
    explicit example says yes or no. One per label and email: the latest decision wins. The
    email's content (and its structural signals) is copied so examples outlive the email.
    """

    label = models.ForeignKey(Label, on_delete=models.CASCADE, related_name="feedback")
    # The API's id of the example (the integer key would tell how many examples all workspaces
    # have); unique index: DELETE /labels/{key}/examples/{id}.
    public_id = models.CharField(max_length=32, default=_lex_id, unique=True, editable=False)
    email_id = models.CharField(max_length=32)
    positive = models.BooleanField()
    source = models.CharField(
        max_length=10, choices=FeedbackSource.choices, default=FeedbackSource.LABEL
    )
    signals = models.JSONField(default=list, blank=True)
    from_address = models.CharField(max_length=320, blank=True, default="")
    from_name = models.CharField(max_length=320, blank=True, default="")
    subject = models.TextField(blank=True, default="")
    text = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()
    tenancy = Tenancy("label__workspace", parents=("label",))

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["label", "email_id"], name="feedback_unique")
        ]
        indexes = [
            # The classifier's examples for a label, newest first.
            models.Index(fields=["label", "-id"], name="feedback_label_recent"),
        ]

    def __str__(self) -> str:
        return f"{'+' if self.positive else '-'}{self.label_id} {self.email_id}"
