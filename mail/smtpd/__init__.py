"""The SMTP front door: the server (``server``) and the writer that stores its batches (``writer``).

``manage.py smtpd`` runs ``server.start_server`` with ``writer.writer_for(SMTP_WRITER)``;
``manage.py serve`` runs the server in embedded mode with a writer thread.

Nothing is imported here on purpose: the writer process imports ``mail.smtpd.writer`` (and so
this package) before Django is set up, and ``server`` imports models.
"""
