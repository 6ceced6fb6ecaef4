"""Explicit examples (issue 31): an API id for each training example, where it came from, and
the structural signals of its email. Existing negative examples came from removing a
classifier's label; existing examples get ids one by one (a default would give them one)."""

from django.db import migrations, models

import labels.models
from config.api.ids import new_id


def _backfill(apps, schema_editor):  # type: ignore[no-untyped-def]
    feedback = apps.get_model("labels", "LabelFeedback")
    feedback.objects.filter(positive=False).update(source="removal")
    for pk in feedback.objects.filter(public_id__isnull=True).values_list("pk", flat=True):
        feedback.objects.filter(pk=pk).update(public_id=new_id("lex"))


class Migration(migrations.Migration):
    dependencies = [
        ("labels", "0003_lean_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="labelfeedback",
            name="public_id",
            field=models.CharField(editable=False, max_length=32, null=True),
        ),
        migrations.AddField(
            model_name="labelfeedback",
            name="source",
            field=models.CharField(
                choices=[("label", "Label"), ("removal", "Removal"), ("example", "Example")],
                default="label",
                max_length=10,
            ),
        ),
        migrations.AddField(
            model_name="labelfeedback",
            name="signals",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.RunPython(_backfill, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="labelfeedback",
            name="public_id",
            field=models.CharField(
                default=labels.models._lex_id, editable=False, max_length=32, unique=True
            ),
        ),
    ]
