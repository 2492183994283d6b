"""An image moderation app: each upload comes with a latency budget, and the decision must fit it.

::

    python examples/image_moderation.py                      # trains a small model first
    python examples/image_moderation.py --index build/moderation-index   # one built by build_script.py

For each request the app asks the classifier for the most accurate model whose features can be
computed on *this* image (its size) within *this* budget, computes only those features, predicts
the image's content category and applies the policy (flag or allow). A tight budget gets a quick, rougher decision; a generous one a slower, better one. Every
decision says what was computed, how long the cost curves predicted and how long it really took.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass

import numpy as np

import polydom


@dataclass(frozen=True)
class Decision:
    action: str
    category: int
    features: tuple
    predicted_ms: float
    measured_ms: float
    budget_ms: float


class ModerationService:
    """Holds a server over a loaded classifier; :meth:`moderate` decides one image within a budget.

    The server learns each feature's guard from the requests it serves, on this machine.
    """

    def __init__(self, index_path: str, flagged=frozenset()):
        self.server = polydom.CostSensitiveClassifier.load(index_path).server()
        self.flagged = flagged

    def moderate(self, image: np.ndarray, budget_ms: float) -> Decision:
        (e,) = self.server.explain([image], budget=budget_ms / 1e3)
        action = "flag" if e.label in self.flagged else "allow"
        return Decision(action, int(e.label), e.features, e.predicted_cost * 1e3, e.measured_cost * 1e3, budget_ms)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", default=None, help="an index built by examples/build_script.py")
    parser.add_argument("--requests", type=int, default=12, help="uploads to simulate")
    parser.add_argument("--per-class", type=int, default=5, help="training pictures per digit (when training here)")
    args = parser.parse_args(argv)

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from build_script import FLAGGED, training_data

    path = args.index
    if path is None:
        from build_script import build

        path = os.path.join(tempfile.mkdtemp(prefix="moderation-"), "index")
        print(f"no --index given: training a small model into {path}")
        build(path, per_class=args.per_class, quiet=True)
    service = ModerationService(path, FLAGGED)

    images, labels, _ = training_data(2, sides=(16, 32, 48), random_state=7)  # "uploads"
    rng = np.random.default_rng(1)
    budgets_ms = [0.2, 0.5, 1.0, 3.0, 10.0]
    print(f"{'size':>7} {'budget':>8}  {'action':<6} {'right':<5} {'predicted':>9} {'measured':>9}  features")
    correct = within = 0
    for k in range(args.requests):
        i = int(rng.integers(len(images)))
        budget = budgets_ms[k % len(budgets_ms)]
        d = service.moderate(images[i], budget)
        right = (d.action == "flag") == (labels[i] in FLAGGED)
        correct += right
        within += d.measured_ms <= budget
        side = images[i].shape[0]
        print(f"{side:>3}x{side:<3} {budget:>6.1f}ms  {d.action:<6} {'yes' if right else 'no':<5} "
              f"{d.predicted_ms:>7.2f}ms {d.measured_ms:>7.2f}ms  {', '.join(d.features) or '(prior only)'}")
    print(f"{correct}/{args.requests} actions right, {within}/{args.requests} decided within budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
