"""In-process lookups in a request handler, and picking up a republished index without a restart.

::

    python examples/realtime_lookup.py                      # builds a small index first
    python examples/realtime_lookup.py --index build/moderation-index

The server loads the index once at start-up. Per request it looks up -- two binary searches, a
few microseconds -- which features fit the request's remaining time, computes only those and
predicts with the set's model through polydom's lean numpy path. Meanwhile a build re-measures
the costs and republishes the index at the same path; the server calls ``refresh()`` between
requests and serves the new version from then on.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

import polydom


class Handler:
    """A request handler holding one loaded classifier."""

    def __init__(self, path: str):
        self.clf = polydom.CostSensitiveClassifier.load(path)
        self.index = self.clf.index_  # the bare index: lookup(size, budget) -> Choice

    def __call__(self, request: dict) -> dict:
        received = request["received"]
        image = request["image"]
        # What is left of the request's deadline once it reaches us pays for feature extraction.
        remaining = max(0.0, request["deadline_s"] - (time.perf_counter() - received))
        size = image.shape[0] * image.shape[1]
        t0 = time.perf_counter()
        choice = self.index.lookup(size, remaining)
        lookup = time.perf_counter() - t0
        label = self.clf.predict([image], budget=remaining)[0]
        return {"label": label, "features": sorted(choice.features), "lookup_s": lookup,
                "total_s": time.perf_counter() - received, "deadline_s": request["deadline_s"]}

    def refresh(self) -> bool:
        """Switch to the newest published version, if any (call between requests)."""
        if not self.index.refresh():
            return False
        self.clf = polydom.CostSensitiveClassifier.load(self.clf.path_)  # the directory it was loaded from
        self.index = self.clf.index_
        return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", default=None, help="an index built by examples/build_script.py")
    parser.add_argument("--requests", type=int, default=200, help="requests to simulate")
    args = parser.parse_args(argv)

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from build_script import build, training_data

    path = args.index
    if path is None:
        path = os.path.join(tempfile.mkdtemp(prefix="realtime-"), "index")
        print(f"no --index given: building a small index at {path}")
        build(path, per_class=4, quiet=True)

    handler = Handler(path)
    images, _, _ = training_data(2, sides=(16, 32, 48), random_state=3)
    rng = np.random.default_rng(0)
    deadlines = [0.0005, 0.001, 0.002, 0.005]

    def serve(n: int) -> list[dict]:
        out = []
        for _ in range(n):
            request = {"image": images[int(rng.integers(len(images)))], "received": time.perf_counter(),
                       "deadline_s": deadlines[int(rng.integers(len(deadlines)))]}
            out.append(handler(request))
        return out

    first = serve(args.requests)
    lookups = np.array([r["lookup_s"] for r in first]) * 1e6
    met = np.mean([r["total_s"] <= r["deadline_s"] for r in first])
    print(f"version {handler.clf.version_}: {len(first)} requests, lookup p50 {np.median(lookups):.1f} us, "
          f"p99 {np.percentile(lookups, 99):.1f} us; {met:.0%} answered within their deadline")

    # A build re-measures the costs on this machine and republishes -- nothing is retrained.
    builder = polydom.CostSensitiveClassifier.load(path)
    builder.recost(images[:2], repeats=1)
    builder.save(path)
    print(f"republished {path}; refresh() picked it up: {handler.refresh()} (now {handler.clf.version_})")
    second = serve(max(1, args.requests // 4))
    print(f"served {len(second)} more requests from the new version; e.g. {second[0]['features']} "
          f"-> category {second[0]['label']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
