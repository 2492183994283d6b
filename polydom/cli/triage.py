"""``polydom triage PATH SOURCE --k K --total-budget S``: the K images of a backlog most likely positive.

SOURCE is a folder (its image files, sorted by name) or a text file listing image paths, one per
line (relative paths are read from the list's folder; blank lines and ``#`` comments skipped).
The classifier saved at PATH ranks them within S seconds of decoding and feature extraction
(:meth:`polydom.CostSensitiveClassifier.triage`). The top K go to ``--out`` as CSV
(``rank,path,score``), or to stdout. Progress lines with the time left go to stderr. Ctrl-C
writes the best ranking found so far, then exits with status 130.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import sys

from . import Interrupted, UsageError
from .files import bounded_lines
from .plan import seconds

__all__ = ["configure", "run", "read_sources"]

#: The longest line a list file may hold (a path).
MAX_LINE = 4096


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="a classifier saved with CostSensitiveClassifier.save")
    parser.add_argument("source", help="a folder of images, or a text file listing image paths")
    parser.add_argument("--k", type=int, required=True, help="how many images to return")
    parser.add_argument("--total-budget", type=seconds, required=True, metavar="S",
                        help="seconds of decoding and extraction for the whole backlog")
    parser.add_argument("--label", default=None,
                        help="the class (or label, with several) to rank by; default the second of two classes")
    parser.add_argument("--out", default=None, metavar="FILE.csv", help="write the top K here instead of stdout")
    parser.add_argument("--feature-modules", default="", metavar="M1,M2",
                        help="modules trusted to define the classifier's custom features (imported to find them)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")


def read_sources(source: str) -> list[str]:
    """The image paths ``source`` names: a folder's image files, or a list file's lines.

    A list file is read only if it is a regular file (a FIFO or a device is refused without
    blocking on it), :data:`MAX_LINE` bytes of a line at a time.
    """
    from polydom.featurizers.sources import image_files

    if os.path.isdir(source):
        return image_files(source)
    base = os.path.dirname(os.path.abspath(source))
    lines = bounded_lines(source, UsageError, source,
                          f"{source} is neither a folder nor a regular file listing image paths",
                          max_line=MAX_LINE, one_per_line="one path per line")
    paths = []
    for _, line in lines:
        line = line.strip()
        if line and not line.startswith("#"):
            paths.append(line if os.path.isabs(line) else os.path.join(base, line))
    if not paths:
        raise UsageError(f"{source} lists no image paths")
    return paths


def _label(text: str | None, classes):
    """``--label`` as the classes' own type (a number where the classes are numbers)."""
    if text is None:
        return None
    for value in classes.tolist():
        if str(value) == text:
            return value
    raise UsageError(f"--label {text!r} is not one of the classifier's classes ({', '.join(map(str, classes.tolist()))})")


def run(args: argparse.Namespace) -> int:
    from polydom.classifier.estimator import CostSensitiveClassifier

    if args.k < 1:
        raise UsageError(f"--k must be >= 1, got {args.k}")
    paths = read_sources(args.source)
    modules = [m.strip() for m in args.feature_modules.split(",") if m.strip()]
    clf = CostSensitiveClassifier.load(args.path, feature_modules=modules)
    result = clf.triage(paths, min(args.k, len(paths)), total_budget=args.total_budget,
                        label=_label(args.label, clf.classes_), progress=not args.quiet)
    rows = [(rank, paths[i], f"{score:.6g}") for rank, (i, score) in enumerate(zip(result.items, result.scores), 1)]
    with open(args.out, "w", newline="") if args.out else contextlib.nullcontext(sys.stdout) as handle:
        writer = csv.writer(handle)
        writer.writerow(("rank", "path", "score"))
        writer.writerows(rows)
    print(f"polydom triage: top {len(rows)} of {len(paths)} images by {result.label!r}; {result.spent:.1f} of "
          f"{args.total_budget:g} s spent ({result.stopped})", file=sys.stderr)
    if result.interrupted:
        where = args.out or "stdout"
        raise Interrupted(f"the best ranking found so far was written to {where}")
    return 0
