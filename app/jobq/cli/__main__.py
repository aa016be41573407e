"""``python -m jobq.cli``: the ``jobq`` command, as tests and the bench start it."""

import sys

from jobq.cli import main

sys.exit(main())
