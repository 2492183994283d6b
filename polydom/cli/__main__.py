"""``python -m polydom.cli``: the ``polydom`` command."""

import sys

from polydom.cli import main

sys.exit(main())
