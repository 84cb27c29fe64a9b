"""``python -m waku_legacy.cli``: the same as the ``waku-legacy`` command."""

import sys

from waku_legacy.cli import main

sys.exit(main())
