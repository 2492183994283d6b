"""``polydom demo [--dataset D] [--out DIR] [--quick]``: run the main job (:func:`polydom.demo.run_demo`).

Ctrl-C stops it with one line saying what the cache kept (the next run resumes from it) and exit
status 130.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from . import UsageError

__all__ = ["configure", "run"]


#: Jobs of their own beside the main job's data sets: several labels per image, and backlog triage.
OTHER_JOBS = ("policies", "backlog")


def configure(parser: argparse.ArgumentParser) -> None:
    from polydom.demo.data import DATASETS

    parser.add_argument("--dataset", choices=DATASETS + OTHER_JOBS, default="digits",
                        help="digits (bundled with scikit-learn; default), fashion-mnist (Debian's "
                             "dataset-fashion-mnist) or photos (natural sizes, generated); policies: several "
                             "labels per image from one walk against one classifier per label; backlog: the "
                             "top K of a generated backlog within a total budget")
    parser.add_argument("--out", default="demo-out", help="output directory (default: demo-out)")
    parser.add_argument("--quick", action="store_true",
                        help="a small run for smoke tests; its numbers carry large standard errors")
    parser.add_argument("--n-jobs", type=int, default=-1, help="parallel workers (default -1: all cores)")
    parser.add_argument("--cache", default=None, help="cache directory (default OUT/cache)")
    parser.add_argument("--no-cache", action="store_true", help="compute everything afresh and keep nothing")
    parser.add_argument("--seed", type=int, default=0, metavar="N",
                        help="which images are drawn and the learners' seeds (default 0)")


def run(args: argparse.Namespace) -> int:
    import time

    from .interrupts import interrupted

    if args.seed < 0:
        raise UsageError(f"--seed must be >= 0, got {args.seed}")
    from polydom.memory import keep_freed_memory

    keep_freed_memory()  # this process serves as a tuned service would (docs/decisions/serving-memory.md)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="polydom-demo-") as scratch:
        cache = scratch if args.no_cache else (args.cache or os.path.join(args.out, "cache"))
        try:
            report = _job(args, cache)
        except KeyboardInterrupt:
            raise interrupted(os.path.join(cache, "expansions"), kept=not args.no_cache) from None
    print(f"polydom demo: report written to {report} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return 0


def _job(args: argparse.Namespace, cache: str) -> str:
    """Run the job ``--dataset`` names with ``cache``; the report's path (``OUT/report.md``)."""
    report = os.path.join(args.out, "report.md")
    if args.dataset == "policies":
        from polydom.demo.policies import run_policies

        run_policies(report, quick=args.quick, random_state=args.seed, cache_dir=cache)
        return report
    if args.dataset == "backlog":
        from polydom.demo.backlog import run_backlog

        run_backlog(report, quick=args.quick, random_state=args.seed, cache_dir=cache)
        return report
    from polydom.demo import run_demo

    return run_demo(args.out, dataset=args.dataset, quick=args.quick, n_jobs=args.n_jobs, cache_dir=cache,
                    random_state=args.seed).report
