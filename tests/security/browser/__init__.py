"""Security matrices that need a browser (issue 11, matrix 6: hostile HTML).

A package of their own: Playwright's sync API keeps an event loop running in the test thread
for as long as its package-scoped fixtures live, which other security tests (``asyncio.run``)
cannot share.
"""
