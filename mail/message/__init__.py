"""The message library: a received message's bytes in, plain data out, with no Django in sight.

Contract: the modules of this package import the standard library and the third-party libraries
named here (nh3, for sanitising HTML) and nothing else: not Django, not any app of this project.
They take bytes and strings and return dataclasses, dicts and strings, so they can be read, tested
and benchmarked without settings or a database; ``tests/test_conventions.py`` checks the rule.

- ``parsing``: MIME parsing of a received message into plain data (``parse_message``).
- ``decoding``: bytes to text for the parser: charsets, transfer encodings, RFC 2047 words.
- ``extraction``: verification codes and links found in a message (``extract``).
- ``htmltext``: HTML to text, whitespace folding and previews.
- ``sanitize``: untrusted e-mail HTML made safe to display (nh3 allow-lists).
- ``mbox``: messages as an mboxrd file (the inbox export).
"""
