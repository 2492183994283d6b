"""A SPEC for `polydom build`: what the precompute step of a build script trains.

    polydom build examples/build_spec.py:SPEC --out build/index --cache build/expansions

``SPEC`` follows the black-box protocol (``costs`` + ``expand`` + ``cache_key``); ``DIGITS``
follows the images protocol (``images`` + ``labels``) and lets polydom measure real feature costs.
"""

import numpy as np


def _digits_black_box():
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = load_digits(return_X_y=True)
    # Four "features": the image's quadrants. Reading a quadrant costs time linear in the pixels.
    quadrants = {
        "top_left": [r * 8 + c for r in range(4) for c in range(4)],
        "top_right": [r * 8 + c for r in range(4) for c in range(4, 8)],
        "bottom_left": [r * 8 + c for r in range(4, 8) for c in range(4)],
        "bottom_right": [r * 8 + c for r in range(4, 8) for c in range(4, 8)],
    }

    def expand(features):
        if not features:
            return float(np.bincount(y).max() / len(y))
        cols = sorted(c for f in features for c in quadrants[f])
        # Scaled pixels let the solver converge in a few dozen iterations (raw 0-16 values need
        # hundreds, and warn when they do not get them).
        learner = make_pipeline(StandardScaler(), LogisticRegression(max_iter=200))
        return float(cross_val_score(learner, X[:, cols], y, cv=3).mean())

    costs = {name: [1e-5, 2e-8] for name in quadrants}
    return {"costs": costs, "expand": expand, "cache_key": "digits-quadrants-logreg-v1"}


SPEC = _digits_black_box


def DIGITS():
    from polydom.featurizers.datasets import load_digits_images

    images, labels, _ = load_digits_images(sides=(16, 32), n_per_class=8)
    return {"images": images, "labels": labels, "features": ["size_meta", "thumbnail", "intensity_hist"], "cv": 2}
