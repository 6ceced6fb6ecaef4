"""Outbox: outgoing mail, its approval state machine, delivery and decisions."""
