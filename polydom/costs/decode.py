"""What decoding an encoded image costs: the decode step's curve, fitted like a feature's, and
the rule by which serving decodes a file only when the decode and a feature fit the budget
(``docs/decisions/decoding.md``)."""

from __future__ import annotations

import numpy as np

from polydom.costs.measure import CostFit
from polydom.featurizers import item_size
from polydom.index.costs.curve import CostCurve
from polydom.index.costs.fitting import evaluate_cost_curve, fit_cost_curve

__all__ = ["DECODE", "decode_fits", "fit_decode_cost", "guarded_decode", "sample_decode_times"]


#: The name of the decode step's cost fit (:func:`fit_decode_cost`); no feature may take it.
DECODE = "decode"

#: The quantile of measured / predicted decode times that serving reserves before decoding
#: (:attr:`CostFit.guard_ratio` of the decode fit): serving decodes an encoded image only if the guarded
#: curve fits the budget, then subtracts the decode's measured time, so a decode predicted to fit
#: overruns the budget on about one image in ten at most.
DECODE_GUARD_QUANTILE = 0.9

#: Fewer decoded training images than this fit no decode curve (serving then decodes every
#: encoded image and subtracts the time it took).
MIN_DECODE_SAMPLES = 3


def fit_decode_cost(samples, *, degree: int = 2) -> "CostFit | None":
    """The decode step's cost curve from ``(size, seconds)`` pairs, one per training image that
    came encoded (``check_images(..., decode_times=...)``): a median regression through every
    call, as a feature's, with the :data:`DECODE_GUARD_QUANTILE` of measured / predicted as its
    guard; None with fewer than :data:`MIN_DECODE_SAMPLES`."""
    if len(samples) < MIN_DECODE_SAMPLES:
        return None
    sizes = np.array([s for s, _ in samples], dtype=np.float64)
    seconds = np.maximum(np.array([t for _, t in samples], dtype=np.float64), 0.0)
    items = np.arange(len(sizes), dtype=np.int64)
    degree = min(degree, len(np.unique(sizes)) - 1)
    curve = CostCurve(fit_cost_curve(sizes, seconds, degree=degree, quantile=0.5, items=items))
    predicted = np.maximum(evaluate_cost_curve(curve.coefficients, sizes), 1e-12)
    guard = max(1.0, float(np.quantile(seconds / predicted, DECODE_GUARD_QUANTILE)))
    return CostFit(DECODE, curve, sizes.astype(np.int64), seconds, 0.5, items, guard_ratio=guard)


def guarded_decode(fit: "CostFit | None", size: float) -> float:
    """The seconds serving reserves to decode an encoded image of ``size`` pixels: the decode
    curve times its guard; 0 without a decode fit (the decode is then only measured)."""
    return 0.0 if fit is None else fit.guard_ratio * fit.curve(size)


def decode_fits(fit: "CostFit | None", size: float, budget: float, index=None) -> bool:
    """Whether serving decodes an encoded image of ``size`` pixels within ``budget`` seconds: its
    guarded decode fits, and -- given the ``index`` that serves it -- the time it leaves still
    buys a feature (an answer that will compute nothing does not decode: the decode would only
    make it late)."""
    left = budget - guarded_decode(fit, size)
    if left < 0.0:
        return False
    if index is None:
        return True
    try:
        return bool(index.lookup(size, left).key)
    except (TypeError, ValueError):  # a size outside the domain: serving's own check names it
        return True


#: Training images whose encoded copies are timed when a classifier is fitted on arrays, so that
#: it learns what decoding a file costs before it serves one (:func:`sample_decode_times`).
DECODE_SAMPLE_IMAGES = 12


def sample_decode_times(images, count: int = DECODE_SAMPLE_IMAGES, random_state=None) -> list:
    """``(size, seconds)`` of decoding encoded copies of ``count`` training arrays, spread over
    their sizes: each encoded as JPEG (quality 90) and as PNG, then decoded as serving decodes a
    file (:func:`polydom.featurizers.sources.decode_image`), timed on the thread's CPU clock.
    Empty when Pillow is missing."""
    try:
        from PIL import Image
    except ImportError:
        return []
    import io
    import time

    from polydom.featurizers.sources import decode_image

    sizes = np.array([item_size(im) for im in images])
    rng = np.random.default_rng(random_state)
    order = np.lexsort((rng.random(len(sizes)), sizes))
    chosen = order[np.linspace(0, len(order) - 1, min(count, len(order))).astype(int)]
    samples = []
    for i in chosen:
        array = np.asarray(images[i])
        if array.dtype != np.uint8:  # bool, uint16 or floats in [0, 1]: a file holds 8 bits
            scale = 255.0 if array.dtype.kind in "fb" else 255.0 / 65535.0
            array = np.clip(np.round(array.astype(np.float64) * scale), 0, 255).astype(np.uint8)
        picture = Image.fromarray(array[..., :3] if array.ndim == 3 else array)
        for fmt, options in (("JPEG", {"quality": 90}), ("PNG", {"compress_level": 1})):
            buffer = io.BytesIO()
            picture.save(buffer, format=fmt, **options)
            data = buffer.getvalue()
            start = time.thread_time()
            decoded = decode_image(data)
            samples.append((decoded.shape[0] * decoded.shape[1], time.thread_time() - start))
    return samples
