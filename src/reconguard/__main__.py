"""``python -m reconguard``: the same as the ``reconguard`` command."""

import sys

from .cli import main

sys.exit(main())
