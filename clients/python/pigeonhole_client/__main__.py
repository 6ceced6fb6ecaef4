"""``python -m pigeonhole_client``: the ``pigeonhole`` command without the console script."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
