"""Benchmarks of the real-time paths (``make bench``, ``python -m tests.benchmarks``).

The harness runs the real processes (``manage.py smtpd`` and daphne) against a database of its
own (``pigeonhole_bench``) and the configured Redis, drives them over SMTP and HTTP from one
asyncio client on 127.0.0.1, and reports each figure beside its target. See ``__main__`` for the
options and ``scenarios`` for what each scenario measures and how.
"""
