"""``python -m m3``: the same entry point as the ``m3`` console script."""

import sys

from m3.gateway.cli import main

sys.exit(main())
