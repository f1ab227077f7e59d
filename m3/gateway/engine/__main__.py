"""``python -m m3.gateway.engine``: run the store's engine in the foreground (front-ends start it this way)."""

import sys

from m3.gateway.engine.server import main

sys.exit(main())
