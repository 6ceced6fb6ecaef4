"""The example's root: pytest puts this directory on sys.path, so tests import ``signup``."""
