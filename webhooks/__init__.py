"""The event hub: the event log, ``emit()``, webhook endpoints, deliveries, attempts, signing."""
