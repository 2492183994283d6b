"""Backlog triage: recall among the top K against the total budget, beside two fixed rankings.

Runs :func:`polydom.demo.backlog.run_backlog` (the job ``polydom demo --dataset backlog`` runs,
at benchmark sizes): 2,000 natural-size JPEG files (0.03-2.9 MP) with 5% positives (captioned),
K = 100, a classifier trained on 400 labelled images (30% positive), quiet, 2 cores. The bar:
recall among the top K at least 0.95 of the all-features ranking's at no more than 20% of its
extraction time, and the total budget never exceeded by more than one step's measured time.

    python -P benchmarks/backlog.py [--n 2000] [--seed 0] [--backlog DIR] [--quick]
        [--out benchmarks/results/backlog.md]
"""

from __future__ import annotations

import argparse
import pathlib
import shlex
import sys

HERE = pathlib.Path(__file__).resolve().parent


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="backlog size (K is 5%% of it)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backlog", default=None, help="keep the backlog's files here (reused when present)")
    parser.add_argument("--quick", action="store_true", help="a smoke test: a few small images")
    parser.add_argument("--out", default=str(HERE / "results" / "backlog.md"))
    args = parser.parse_args(argv)
    from polydom.demo.backlog import BacklogSettings, backlog_settings, run_backlog
    from polydom.demo.job import stamped_log

    settings = backlog_settings(True) if args.quick else BacklogSettings(n_backlog=args.n, k=max(1, args.n // 20))
    shown = ["DIR" if i and sys.argv[i] == args.backlog and sys.argv[i - 1] == "--backlog" else a
             for i, a in enumerate(sys.argv)][1:]  # where the files are kept is this machine's business
    command = "python -P benchmarks/backlog.py" + ("" if not shown else " " + shlex.join(shown))
    ctx = run_backlog(args.out, settings=settings, random_state=args.seed, backlog_dir=args.backlog,
                      command=command, log=stamped_log(""))
    v = ctx["verdict"]
    print(f"best triage recall within 20% of the all-features time: {v['best_recall']:.3f} "
          f"(all features {ctx['fixed']['all features']['recall']:.3f}); overruns beyond one step: {v['overruns']}; "
          f"bar {'met' if v['met'] else 'not met'}. Report: {args.out}")


if __name__ == "__main__":
    main()
