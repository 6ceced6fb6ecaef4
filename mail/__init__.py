"""Mail: emails, attachments, raw storage, the receive pipeline, the SMTP server (``smtpd``).

``mail.message`` is the Django-free message library (parsing, extraction, HTML to text,
sanitising); it imports nothing from Django or this project (its ``__init__`` states the rule).
"""
