"""Moderation-style images at natural sizes, made on any machine, with several policies each.

A moderation service asks several questions of one image. This module makes images on which such
questions have answers the built-in features can learn: each is a photo crop or a flat graphic
(`load_natural_images`'s two kinds, 0.03 to 2.9 MP by default), then independently, each with
probability ``share``:

* **captioned** -- one or two lines of white text with a dark outline across the top or bottom
  (the overlay of a meme or a spam picture);
* **blurred** -- a Gaussian blur of 0.6-1.5% of the short side (out of focus, or re-encoded);
* **grainy** -- per-pixel noise (a low-light sensor, or added to dodge a filter);
* **dark** -- underexposed, the pixel values scaled to 25-45%.

Labels: ``("photo", "captioned", "blurred", "grainy", "dark")``. Captions are drawn after the
blur, so a blurred image can still carry a sharp caption; grain and darkening come last.

* `load_moderation_images` -- images with one 0/1 column per label.
* `iter_backlog` / `write_backlog` / `read_backlog` -- a backlog where one label is rare (5%
  captioned by default) and the others occur as usual.

Everything derives from ``random_state``: the same seed gives the same images on the same library
versions. (Pictures pasted on the canvas -- Fashion-MNIST items or digits -- were tried as labels
first; no built-in feature told their categories apart at 300 training images:
``docs/decisions/multilabel.md``.)
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from polydom.featurizers.natural import _graphic, _photo, _photo_sources, _shapes

__all__ = ["MODERATION_LABELS", "MODERATION_MIN_SHAPE", "MODERATION_MAX_SHAPE", "load_moderation_images",
           "iter_backlog", "write_backlog", "read_backlog"]

#: The labels, in column order.
MODERATION_LABELS = ("photo", "captioned", "blurred", "grainy", "dark")

#: Smallest and largest default shapes (height, width): 0.03 and 2.9 MP.
MODERATION_MIN_SHAPE = (150, 200)
MODERATION_MAX_SHAPE = (1400, 2100)

_WORDS = ("when", "you", "finally", "see", "it", "free", "click", "here", "win", "now", "limited", "offer", "me",
          "every", "monday", "nobody", "the", "cat", "best", "deal", "today", "only", "share", "if", "agree")


def _check(n_images, share) -> None:
    if isinstance(n_images, bool) or not isinstance(n_images, (int, np.integer)) or n_images < 1:
        raise ValueError(f"n_images must be a positive integer, got {n_images!r}")
    if not (isinstance(share, (int, float)) and 0 < share < 1):
        raise ValueError(f"the share of each label must lie in (0, 1), got {share!r}")


def _caption(image, rng: np.random.Generator):
    from PIL import ImageDraw, ImageFont

    width, height = image.size
    short = min(width, height)
    size = max(10, int(short * rng.uniform(0.07, 0.12)))
    font = ImageFont.load_default(size=size)
    draw = ImageDraw.Draw(image)
    lines = int(rng.integers(1, 3))
    top = rng.random() < 0.5
    y = int(height * 0.03) if top else int(height * 0.97 - lines * size * 1.25)
    for _ in range(lines):
        chosen = [_WORDS[int(i)].upper() for i in rng.integers(len(_WORDS), size=int(rng.integers(2, 6)))]
        while True:  # as many of the words as fit the width
            words = " ".join(chosen)
            left, _, right, _ = draw.textbbox((0, 0), words, font=font)
            if right - left <= 0.94 * width or len(chosen) == 1:
                break
            chosen.pop()
        x = max(2, int((width - (right - left)) / 2))
        draw.text((x, y), words, font=font, fill=(255, 255, 255), stroke_width=max(1, size // 12),
                  stroke_fill=(0, 0, 0))
        y += int(size * 1.25)
    return image


def _moderated(shape, rng: np.random.Generator, sources, share: float, forced: dict | None = None):
    """One image of ``shape`` and its label row; ``forced`` fixes some labels (by name)."""
    from PIL import Image, ImageFilter

    forced = forced or {}
    draws = {name: bool(rng.random() < (0.5 if name == "photo" else share)) for name in MODERATION_LABELS}
    draws.update(forced)
    photo = draws["photo"]
    image = Image.fromarray(_photo(shape, rng, sources) if photo else _graphic(shape, rng))
    short = min(shape)
    if draws["blurred"]:
        image = image.filter(ImageFilter.GaussianBlur(radius=max(1.0, short * rng.uniform(0.006, 0.015))))
    if draws["captioned"]:
        image = _caption(image, rng)
    array = np.asarray(image, dtype=np.float32)
    if draws["grainy"]:
        array = array + rng.normal(0.0, rng.uniform(12.0, 25.0), size=array.shape).astype(np.float32)
    if draws["dark"]:
        array = array * rng.uniform(0.25, 0.45)
    row = [int(draws[name]) for name in MODERATION_LABELS]
    return np.clip(array, 0, 255).astype(np.uint8), row


def load_moderation_images(n_images: int = 200, *, share: float = 0.35, random_state: int = 0,
                           min_shape=MODERATION_MIN_SHAPE, max_shape=MODERATION_MAX_SHAPE,
                           max_aspect: float = 2.5) -> tuple[list[np.ndarray], np.ndarray, tuple[str, ...]]:
    """Images with several labels each (`MODERATION_LABELS`): photo or graphic (half each), and
    captioned, blurred, grainy and dark, each independently with probability ``share``.

    Parameters
    ----------
    n_images : int, default 200
    share : float, default 0.35
    random_state : int, default 0
    min_shape, max_shape : (int, int)
        ``(height, width)`` of the smallest and largest images' areas (log-uniform between).
    max_aspect : float, default 2.5

    Returns
    -------
    images : list of numpy.ndarray
        ``uint8`` RGB arrays of natural sizes.
    Y : numpy.ndarray of int8, shape (n_images, 5)
        One 0/1 column per label.
    labels : tuple of str
        `MODERATION_LABELS`, the columns' names.
    """
    _check(n_images, share)
    rng = np.random.default_rng(random_state)
    sources = _photo_sources()
    images, rows = [], []
    for shape in _shapes(int(n_images), rng, tuple(min_shape), tuple(max_shape), max_aspect):
        image, row = _moderated(shape, rng, sources, share)
        images.append(image)
        rows.append(row)
    return images, np.asarray(rows, dtype=np.int8), MODERATION_LABELS


def iter_backlog(n_images: int = 2000, *, positive: str = "captioned", positive_share: float = 0.05,
                 share: float = 0.35, random_state: int = 0, min_shape=MODERATION_MIN_SHAPE,
                 max_shape=MODERATION_MAX_SHAPE, max_aspect: float = 2.5) -> Iterator[tuple[np.ndarray, int]]:
    """A backlog's images one at a time, ``(image, label)``: label 1 for the rare positives.

    Exactly ``round(positive_share * n_images)`` images carry the ``positive`` label (one of
    `MODERATION_LABELS`), at random positions; the other labels occur with probability ``share``
    as in `load_moderation_images`. One image at a time, so a backlog of thousands of
    natural-size images never sits in memory whole.
    """
    _check(n_images, share)
    if not (isinstance(positive_share, (int, float)) and 0 < positive_share < 1):
        raise ValueError(f"positive_share must lie in (0, 1), got {positive_share!r}")
    if positive not in MODERATION_LABELS:
        raise ValueError(f"positive must be one of {MODERATION_LABELS}, got {positive!r}")
    rng = np.random.default_rng(random_state)
    sources = _photo_sources()
    n_images = int(n_images)
    positives = set(rng.choice(n_images, size=int(round(positive_share * n_images)), replace=False).tolist())
    for i, shape in enumerate(_shapes(n_images, rng, tuple(min_shape), tuple(max_shape), max_aspect)):
        label = int(i in positives)
        image, _ = _moderated(shape, rng, sources, share, forced={positive: bool(label)})
        yield image, label


def write_backlog(folder, n_images: int = 2000, *, quality: int = 90, **options) -> list[Path]:
    """Write :func:`iter_backlog`'s images to ``folder`` as JPEG files, with ``labels.csv``
    (``path,label``); returns the paths in order. ``options`` go to :func:`iter_backlog`."""
    from PIL import Image

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    width = max(4, int(math.log10(max(1, n_images))) + 1)
    paths, labels = [], []
    for i, (image, label) in enumerate(iter_backlog(n_images, **options)):
        path = folder / f"item-{i:0{width}d}.jpg"
        Image.fromarray(image).save(path, quality=quality)
        paths.append(path)
        labels.append(label)
    with open(folder / "labels.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["path", "label"])
        writer.writerows((os.fspath(p.name), label) for p, label in zip(paths, labels))
    return paths


def read_backlog(folder) -> tuple[list[Path], np.ndarray]:
    """The paths and labels :func:`write_backlog` wrote to ``folder``."""
    folder = Path(folder)
    with open(folder / "labels.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return [folder / row["path"] for row in rows], np.array([int(row["label"]) for row in rows], dtype=np.int64)
