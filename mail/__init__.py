"""Mail: emails, attachments, raw storage, the receive pipeline, extraction, the SMTP front door."""
