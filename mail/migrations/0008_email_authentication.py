"""``Email.authentication``: the SPF, DKIM, DMARC and ARC verdicts of a received message
(``mail.authentication``). A nullable column without a default: adding it rewrites no row, and
mail stored before it reads ``null`` (not checked)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("mail", "0007_email_envelope_recipients"),
    ]

    operations = [
        migrations.AddField(
            model_name="email",
            name="authentication",
            field=models.JSONField(blank=True, default=None, null=True),
        ),
    ]
