"""Every backend and serving variant of the classifier compared on held-out images.

Usage::

    python -P benchmarks/backends.py --out build/backends [--quick] [--dataset fashion-mnist]

Writes ``OUT/report.md`` (see :mod:`lab`). Other benchmarks judge a finished run of it
(``--out`` of ``guard_recovery.py``, ``lookup_scores.py``, ``probe_interval.py``, ``seeds.py``).
"""

import argparse
import os
import sys

from polydom.cli import UsageError
from polydom.errors import PolydomError

# Run as ``python -P``, a script's own folder is not on sys.path; ``lab`` is the package beside it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lab import cli  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.configure(parser)
    args = parser.parse_args(argv)
    try:
        return cli.run(args)
    except (UsageError, PolydomError, ValueError) as error:
        parser.error(str(error))


if __name__ == "__main__":
    sys.exit(main())
