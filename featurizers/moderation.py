"""Moderation-style images at natural sizes, made on any machine: canvases holding a few small
pictures, labelled by what they hold.

A canvas is a photo crop or a flat graphic (`load_natural_images`'s two kinds, 0.03 to 3 MP by
default) with one to three small pictures pasted on it: scikit-learn's bundled handwritten digits
(nothing to download) or Fashion-MNIST items (Debian's ``dataset-fashion-mnist``). Each picture
covers a third to half of the canvas's short side, drawn in a colour that stands out from the
canvas where it lands.

* `load_moderation_images` -- several labels per image (a policy each): whether the canvas is a
  photo, and for each of four picture categories whether one appears.
* `iter_backlog` / `write_backlog` -- a backlog with a rare positive class: the images holding a
  picture of one category, the others holding pictures of the other categories only.

Everything derives from ``random_state``: the same seed gives the same images on the same library
versions.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from polydom.featurizers.natural import _graphic, _photo, _photo_sources, _shapes

__all__ = ["MODERATION_GROUPS", "MODERATION_MIN_SHAPE", "MODERATION_MAX_SHAPE", "load_moderation_images",
           "iter_backlog", "write_backlog", "read_backlog"]

#: Picture categories per source: label name -> the source's classes it covers.
MODERATION_GROUPS = {
    "digits": {"digits 0-2": (0, 1, 2), "digits 3-5": (3, 4, 5), "digits 6-7": (6, 7), "digits 8-9": (8, 9)},
    "fashion-mnist": {"top": (0, 2, 4, 6), "trousers or dress": (1, 3), "footwear": (5, 7, 9), "bag": (8,)},
}

#: Smallest and largest default canvas shapes (height, width): 0.03 and 2.9 MP.
MODERATION_MIN_SHAPE = (150, 200)
MODERATION_MAX_SHAPE = (1400, 2100)


def _pictures(items: str, directory=None) -> tuple[np.ndarray, np.ndarray]:
    """The small pictures of ``items`` as ``[0, 1]`` floats (bright on dark) and their classes."""
    if items == "digits":
        from sklearn.datasets import load_digits

        digits = load_digits()
        return digits.images / 16.0, digits.target.astype(np.int64)
    if items == "fashion-mnist":
        from polydom.featurizers.datasets import load_fashion_mnist

        pictures, labels = load_fashion_mnist(directory, subset="t10k")
        return pictures / 255.0, labels
    raise ValueError(f"items must be one of {sorted(MODERATION_GROUPS)}, got {items!r}")


def _check(n_images, items) -> None:
    if isinstance(n_images, bool) or not isinstance(n_images, (int, np.integer)) or n_images < 1:
        raise ValueError(f"n_images must be a positive integer, got {n_images!r}")
    if items not in MODERATION_GROUPS:
        raise ValueError(f"items must be one of {sorted(MODERATION_GROUPS)}, got {items!r}")


class _Composer:
    """Draws canvases and pastes pictures of chosen categories on them."""

    def __init__(self, items: str, directory, rng: np.random.Generator):
        self.pictures, classes = _pictures(items, directory)
        self.groups = MODERATION_GROUPS[items]
        self.members = [np.flatnonzero(np.isin(classes, members)) for members in self.groups.values()]
        self.sources = _photo_sources()
        self.rng = rng

    def canvas(self, shape, categories) -> tuple[np.ndarray, bool]:
        """A canvas of ``shape`` holding one picture per entry of ``categories`` (group
        positions), and whether it is a photo."""
        rng = self.rng
        photo = bool(rng.random() < 0.5)
        image = _photo(shape, rng, self.sources) if photo else _graphic(shape, rng)
        image = image.astype(np.float32)
        height, width = shape
        slots = len(categories)
        long_is_width = width >= height
        for slot, category in enumerate(categories):
            picture = self.pictures[int(rng.choice(self.members[category]))]
            side = max(8, int(min(height, width) * rng.uniform(0.33, 0.5)))
            alpha = _resized(picture, side)
            # One slot per picture along the long side, so that pictures rarely hide each other.
            span = (width if long_is_width else height) / slots
            along = int(slot * span + rng.uniform(0, max(1.0, span - side)))
            across = int(rng.uniform(0, max(1, (height if long_is_width else width) - side)))
            top, left = (across, along) if long_is_width else (along, across)
            top, left = min(top, height - side), min(left, width - side)
            region = image[top:top + side, left:left + side]
            bright = region.mean() < 128
            colour = rng.uniform(200, 255, 3) if bright else rng.uniform(0, 55, 3)
            a = alpha[..., None]
            image[top:top + side, left:left + side] = region * (1 - a) + colour * a
        return np.clip(image, 0, 255).astype(np.uint8), photo


def _resized(picture: np.ndarray, side: int) -> np.ndarray:
    from PIL import Image

    scaled = Image.fromarray((picture * 255).astype(np.uint8)).resize((side, side), Image.Resampling.BILINEAR)
    return np.asarray(scaled, dtype=np.float32) / 255.0


def load_moderation_images(n_images: int = 200, *, items: str = "digits", random_state: int = 0,
                           min_shape=MODERATION_MIN_SHAPE, max_shape=MODERATION_MAX_SHAPE, max_aspect: float = 2.5,
                           directory=None) -> tuple[list[np.ndarray], np.ndarray, tuple[str, ...]]:
    """Canvases with several labels each: is it a photo, and which picture categories appear.

    Each canvas holds one to three pictures (equally often), each of a category drawn uniformly
    from the four of ``items`` (`MODERATION_GROUPS`), so each category label is positive on
    about 40% of the images and the photo label on half.

    Parameters
    ----------
    n_images : int, default 200
    items : {"digits", "fashion-mnist"}, default "digits"
        The small pictures: scikit-learn's bundled digits, or Fashion-MNIST's test set (read
        from ``directory``, default Debian's ``dataset-fashion-mnist`` folder).
    random_state : int, default 0
    min_shape, max_shape : (int, int)
        ``(height, width)`` of the smallest and largest canvases' areas.
    max_aspect : float, default 2.5

    Returns
    -------
    images : list of numpy.ndarray
        ``uint8`` RGB arrays of natural sizes.
    Y : numpy.ndarray of int8, shape (n_images, 5)
        One 0/1 column per label.
    labels : tuple of str
        ``("photo", *categories)``: the columns' names.
    """
    _check(n_images, items)
    rng = np.random.default_rng(random_state)
    composer = _Composer(items, directory, rng)
    groups = list(composer.groups)
    images, rows = [], []
    for shape in _shapes(int(n_images), rng, tuple(min_shape), tuple(max_shape), max_aspect):
        categories = [int(c) for c in rng.integers(len(groups), size=int(rng.integers(1, 4)))]
        image, photo = composer.canvas(shape, categories)
        images.append(image)
        rows.append([int(photo)] + [int(g in categories) for g in range(len(groups))])
    return images, np.asarray(rows, dtype=np.int8), ("photo", *groups)


def iter_backlog(n_images: int = 2000, *, positive_share: float = 0.05, items: str = "digits",
                 positive: str | None = None, random_state: int = 0, min_shape=MODERATION_MIN_SHAPE,
                 max_shape=MODERATION_MAX_SHAPE, max_aspect: float = 2.5,
                 directory=None) -> Iterator[tuple[np.ndarray, int]]:
    """A backlog's images one at a time, ``(image, label)``: label 1 for the rare positives.

    A positive holds one picture of the ``positive`` category (default the last of ``items``'s
    `MODERATION_GROUPS`) and up to two of others; a negative holds one to three pictures of the
    other categories. Exactly ``round(positive_share * n_images)`` images are positive, at random
    positions. One image at a time, so a backlog of thousands of natural-size images never sits
    in memory whole.
    """
    _check(n_images, items)
    if not (isinstance(positive_share, (int, float)) and 0 < positive_share < 1):
        raise ValueError(f"positive_share must lie in (0, 1), got {positive_share!r}")
    groups = list(MODERATION_GROUPS[items])
    positive = groups[-1] if positive is None else positive
    if positive not in groups:
        raise ValueError(f"positive must be one of {groups}, got {positive!r}")
    target = groups.index(positive)
    others = [g for g in range(len(groups)) if g != target]
    rng = np.random.default_rng(random_state)
    composer = _Composer(items, directory, rng)
    n_images = int(n_images)
    positives = set(rng.choice(n_images, size=int(round(positive_share * n_images)), replace=False).tolist())
    for i, shape in enumerate(_shapes(n_images, rng, tuple(min_shape), tuple(max_shape), max_aspect)):
        k = int(rng.integers(1, 4))
        categories = [int(rng.choice(others)) for _ in range(k)]
        label = int(i in positives)
        if label:
            categories[int(rng.integers(k))] = target
        image, _ = composer.canvas(shape, categories)
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
