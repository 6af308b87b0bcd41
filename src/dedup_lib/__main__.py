"""``python -m dedup_lib``: the ``dedup-lib`` command line."""

import sys

from dedup_lib.cli import main

sys.exit(main())
