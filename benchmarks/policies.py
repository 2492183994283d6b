"""Several labels, one walk: a multilabel classifier against one classifier per label.

Runs :func:`polydom.demo.policies.run_policies` (the comparison ``polydom demo --dataset
policies`` runs, at benchmark sizes): 300 training and 200 held-out moderation-style images at
natural sizes (0.03-2.9 MP), five labels each, served for real at 2-500 ms per image, quiet.
The bar: the one walk never more than one paired SE behind, and more than two ahead in at least
half the budgets that bind.

    python -P benchmarks/policies.py [--train 300] [--held-out 200] [--seed 0] [--quick]
        [--out benchmarks/results/policies.md]
"""

from __future__ import annotations

import argparse
import pathlib
import shlex
import sys

HERE = pathlib.Path(__file__).resolve().parent


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=300)
    parser.add_argument("--held-out", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a smoke test: few small images")
    parser.add_argument("--out", default=str(HERE / "results" / "policies.md"))
    args = parser.parse_args(argv)
    from polydom.demo.policies import PolicySettings, policy_settings, run_policies
    from polydom.demo.job import stamped_log

    settings = policy_settings(True) if args.quick else PolicySettings(n_train=args.train, n_held=args.held_out)
    command = "python -P benchmarks/policies.py" + ("" if not sys.argv[1:] else " " + shlex.join(sys.argv[1:]))
    ctx = run_policies(args.out, settings=settings, random_state=args.seed, command=command, log=stamped_log(""))
    v = ctx["verdict"]
    print(f"behind by > 1 SE: {v['behind']}; binding budgets {v['binding']}, ahead by > 2 SE in {v['ahead']}; "
          f"bar {'met' if v['met'] else 'not met'}. Report: {args.out}")


if __name__ == "__main__":
    main()
