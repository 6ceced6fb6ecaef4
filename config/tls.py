"""The process's one verifying TLS client context, for every outbound HTTPS client we make.

Building a context loads the CA bundle: about 30 ms of CPU each time, more than the rest of a
webhook delivery or a classifier request. Webhook delivery (``webhooks.sender``) and the
OpenAI-compatible classifier (``labels.classifier.openai``) share this one; a context is safe to
share between threads and connections once it is set up.
"""

from __future__ import annotations

import functools
import ssl


@functools.cache
def client_context() -> ssl.SSLContext:
    """httpx's default verifying context (its CA bundle, hostname checks), made once."""
    import httpx  # not at import: processes that never send import this module (webhooks.sender)

    return httpx.create_ssl_context()
