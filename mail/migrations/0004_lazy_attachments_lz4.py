"""Attachments keep where their bytes lie in the raw message instead of a second copy of them,
and the large columns every received message writes are compressed with LZ4 (PostgreSQL only;
see :mod:`config.postgresql.compression`). Rows stored before keep their bytes and read as
before.
"""

from django.db import migrations, models

from config.postgresql.compression import use_lz4


class Migration(migrations.Migration):

    dependencies = [
        ('mail', '0003_lean_indexes'),
    ]

    operations = [
        migrations.AddField(
            model_name='attachment',
            name='raw_end',
            field=models.PositiveIntegerField(null=True),
        ),
        migrations.AddField(
            model_name='attachment',
            name='raw_start',
            field=models.PositiveIntegerField(null=True),
        ),
        migrations.AddField(
            model_name='attachment',
            name='transfer_encoding',
            field=models.CharField(blank=True, default='', max_length=32),
        ),
        migrations.AlterField(
            model_name='attachment',
            name='content',
            field=models.BinaryField(null=True),
        ),
        migrations.AddConstraint(
            model_name='attachment',
            constraint=models.CheckConstraint(condition=models.Q(('content__isnull', False), models.Q(('raw_end__isnull', False), ('raw_start__isnull', False)), _connector='OR'), name='attachment_bytes_or_span'),
        ),
        use_lz4(
            ("mail_rawmessage", "content"),
            ("mail_attachment", "content"),
            ("mail_email", "text"),
            ("mail_email", "html"),
            ("mail_email", "search_text"),
            ("mail_email", "headers"),
            ("mail_email", "extracted"),
        ),
    ]
