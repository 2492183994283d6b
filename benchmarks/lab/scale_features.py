"""Six features a moderation team would write, for ``benchmarks/features_scale.py``.

Each is a plain ``polydom.feature`` over the whole image, so its cost grows with the pixel count
as the built-in ones do. Importing this module registers them; a fresh process that loads an
index using them trusts the module by name (``feature_modules=["lab.scale_features"]``).
"""

from __future__ import annotations

import functools

import numpy as np

import polydom

__all__ = ["CUSTOM_FEATURES"]

#: The custom features in the order the benchmark adds them.
CUSTOM_FEATURES = ("colour_stats", "saturation_hist", "grey_entropy", "palette", "flat_share", "face_count")


def _rgb(image) -> np.ndarray:
    array = np.asarray(image)
    return np.repeat(array[..., None], 3, axis=2) if array.ndim == 2 else array[..., :3]


@polydom.feature(dimension=9)
def colour_stats(image):
    "Mean and spread of each colour channel, and the means of the channel differences."
    rgb = _rgb(image).astype(np.float32) / 255.0
    means = rgb.mean(axis=(0, 1))
    spreads = rgb.std(axis=(0, 1))
    return np.concatenate([means, spreads, [means[0] - means[1], means[1] - means[2], means[0] - means[2]]])


@polydom.feature(dimension=8)
def saturation_hist(image):
    "Histogram of the HSV saturation in 8 bins, as pixel fractions."
    rgb = _rgb(image).astype(np.float32)
    high, low = rgb.max(axis=2), rgb.min(axis=2)
    saturation = np.where(high > 0, (high - low) / np.maximum(high, 1e-6), 0.0)
    counts, _ = np.histogram(saturation, bins=8, range=(0.0, 1.0))
    return counts / max(1, saturation.size)


@polydom.feature(dimension=5, requires=("grey",))
def grey_entropy(image, grey):
    "Shannon entropy of the grey levels (64 bins), over the whole image and each half."
    def entropy(values):
        counts, _ = np.histogram(values, bins=64, range=(0.0, 1.0))
        p = counts[counts > 0] / max(1, values.size)
        return float(-(p * np.log2(p)).sum())

    h, w = grey.shape
    return [entropy(grey), entropy(grey[: h // 2]), entropy(grey[h // 2:]), entropy(grey[:, : w // 2]),
            entropy(grey[:, w // 2:])]


@polydom.feature(dimension=4)
def palette(image):
    "How many colours the image uses: distinct 4-bit colours, and the share of the top 1, 8 and 32."
    rgb = _rgb(image)
    codes = ((rgb[..., 0] >> 4).astype(np.int32) << 8) | ((rgb[..., 1] >> 4).astype(np.int32) << 4) | (rgb[..., 2] >> 4)
    counts = np.sort(np.bincount(codes.ravel(), minlength=4096))[::-1]
    total = max(1, codes.size)
    return [np.log1p(np.count_nonzero(counts)), counts[0] / total, counts[:8].sum() / total, counts[:32].sum() / total]


@polydom.feature(dimension=16, requires=("grey",))
def flat_share(image, grey):
    "Share of pixels with no grey-level change to their right neighbour, on a 4 x 4 grid."
    flat = np.zeros_like(grey, dtype=np.float32)
    flat[:, :-1] = np.abs(np.diff(grey, axis=1)) < 1e-3
    h, w = flat.shape
    rows, cols = np.array_split(np.arange(h), 4), np.array_split(np.arange(w), 4)
    return [float(flat[r[0]: r[-1] + 1, c[0]: c[-1] + 1].mean()) for r in rows for c in cols]


@functools.lru_cache(maxsize=1)
def _face_detector():
    from skimage import data
    from skimage.feature import Cascade

    return Cascade(data.lbp_frontal_face_cascade_filename())


@polydom.feature(dimension=3, requires=("grey",))
def face_count(image, grey):
    "Frontal faces found by scikit-image's bundled LBP cascade (on a copy at most 320 px wide): count, largest, mean size."
    from PIL import Image

    h, w = grey.shape
    scale = min(1.0, 320.0 / max(h, w))
    small = np.asarray(Image.fromarray((grey * 255).astype(np.uint8)).resize(
        (max(24, int(w * scale)), max(24, int(h * scale))), Image.Resampling.BOX), dtype=np.float64) / 255.0
    found = _face_detector().detect_multi_scale(img=small, scale_factor=1.25, step_ratio=1, min_size=(24, 24),
                                                 max_size=(small.shape[0], small.shape[1]))
    sizes = [f["width"] / small.shape[1] for f in found]
    return [len(found), max(sizes, default=0.0), float(np.mean(sizes)) if sizes else 0.0]
