"""Custom domains receive mail only once verified by a DNS TXT record (issue 23, item 7).

Existing custom domains are kept receiving ("grandfathered": ``verified`` with ``verified_at``
null, as if an operator had vouched for them), so an upgrade loses no mail; the dashboard and
GET /domains show each one the record to publish, and the periodic re-check upgrades it to a
proven domain once the record is found. The exception is a name that is a shared domain of this
instance or a subdomain of one: never a custom domain, it stops receiving now. Every row gets a
token of its own (the field's default is computed once for all existing rows).
"""

import secrets

import inboxes.models
from django.conf import settings
from django.db import migrations, models


def _under_a_shared_domain(name: str) -> bool:
    return any(name == shared or name.endswith("." + shared) for shared in settings.INBOX_DOMAINS)


def grandfather(apps, schema_editor) -> None:
    Domain = apps.get_model("inboxes", "Domain")
    for row in Domain.objects.all().only("pk", "domain"):
        Domain.objects.filter(pk=row.pk).update(
            verification_token=secrets.token_hex(16),
            verified=not _under_a_shared_domain(row.domain),
        )


class Migration(migrations.Migration):

    dependencies = [
        ('apikeys', '0001_initial'),
        ('inboxes', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='domain',
            name='failed_checks',
            field=models.PositiveIntegerField(default=0, editable=False),
        ),
        migrations.AddField(
            model_name='domain',
            name='last_check_detail',
            field=models.CharField(blank=True, default='', editable=False, max_length=500),
        ),
        migrations.AddField(
            model_name='domain',
            name='last_check_result',
            field=models.CharField(blank=True, choices=[('found', 'Found'), ('missing', 'Missing'), ('dns_error', 'Dns Error'), ('conflict', 'Conflict'), ('refused', 'Refused')], default='', editable=False, max_length=12),
        ),
        migrations.AddField(
            model_name='domain',
            name='last_checked_at',
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name='domain',
            name='verification_token',
            field=models.CharField(default=inboxes.models._verification_token, editable=False, max_length=64),
        ),
        migrations.AddField(
            model_name='domain',
            name='verified',
            field=models.BooleanField(default=False, help_text="Receives mail. Tick only for a domain you know is this one's."),
        ),
        migrations.AddField(
            model_name='domain',
            name='verified_at',
            field=models.DateTimeField(blank=True, editable=False, help_text='When the TXT record was last found.', null=True),
        ),
        migrations.AlterField(
            model_name='domain',
            name='domain',
            field=models.CharField(max_length=253),
        ),
        migrations.RunPython(grandfather, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name='domain',
            index=models.Index(fields=['last_checked_at'], name='domain_recheck_due'),
        ),
        migrations.AddConstraint(
            model_name='domain',
            constraint=models.UniqueConstraint(fields=('domain', 'workspace'), name='domain_claim_once', violation_error_message='This workspace has this domain already.'),
        ),
        migrations.AddConstraint(
            model_name='domain',
            constraint=models.UniqueConstraint(condition=models.Q(('verified', True)), fields=('domain',), name='domain_verified_once', violation_error_message='Another workspace has this domain verified.'),
        ),
    ]
