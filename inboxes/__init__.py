"""Inboxes and domains: addresses, generation of readable names, expiry."""
