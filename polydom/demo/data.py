"""The demo's images and their split into training and held-out items.

Digits and Fashion-MNIST pictures are rendered at several square sides; every rendering of a
picture falls on the same side of the split, so a held-out item never has a twin in training.
The photos data set (:func:`polydom.featurizers.natural.load_natural_images`) has one item per
picture, from about 200 x 150 to 2400 x 1600 pixels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DATASETS", "DemoData", "load_demo_data", "load_split", "split_pictures", "size_ranges"]

#: The data sets the demo runs on.
DATASETS = ("digits", "fashion-mnist", "photos")


@dataclass
class DemoData:
    """Images with labels, the split and what each held-out item is judged by.

    Attributes
    ----------
    images : list of ndarray
    labels : ndarray of int
    train, test : ndarray of int
        Positions of the training and held-out items in ``images``.
    pictures : ndarray of int
        The picture each image was made from (the unit of standard errors and of the split).
    classes : tuple of str
        Label names.
    """

    images: list
    labels: np.ndarray
    train: np.ndarray
    test: np.ndarray
    pictures: np.ndarray
    classes: tuple

    def sizes(self, positions) -> np.ndarray:
        """Pixel counts of the images at ``positions``."""
        return np.array([self.images[i].shape[0] * self.images[i].shape[1] for i in positions], dtype=float)


def split_pictures(labels: np.ndarray, n_sides: int, train_per_class: int, random_state: int):
    """Training and held-out image indices, whole pictures at a time: ``train_per_class`` random
    pictures of each class for training, the rest of the class held out. Every picture's
    ``n_sides`` renderings are consecutive in ``labels``."""
    pictures = labels[::n_sides]
    rng = np.random.default_rng(random_state)
    is_train = np.zeros(len(pictures), dtype=bool)
    for label in np.unique(pictures):
        members = rng.permutation(np.flatnonzero(pictures == label))
        is_train[members[:train_per_class]] = True
    expand = np.repeat(is_train, n_sides)
    return np.flatnonzero(expand), np.flatnonzero(~expand)


def load_split(dataset: str, sides, train_per_class: int, held_out_per_class: int, random_state: int):
    """Every picture of ``dataset`` (``"digits"`` or ``"fashion-mnist"``) rendered at every side,
    split by :func:`split_pictures`: ``(images, labels, train, test)``."""
    from polydom.featurizers.datasets import load_digits_images, load_fashion_mnist_images

    load = load_digits_images if dataset == "digits" else load_fashion_mnist_images
    images, labels, _ = load(sides=sides, n_per_class=train_per_class + held_out_per_class, random_state=random_state)
    train, test = split_pictures(labels, len(sides), train_per_class, random_state)
    return images, labels, train, test


def load_demo_data(dataset: str, *, sides=(28, 56, 112), train_per_class: int = 20, held_out_per_class: int = 50,
                   n_train: int = 120, n_held_out: int = 300, random_state: int = 0) -> DemoData:
    """The demo's data: ``dataset`` in :data:`DATASETS`.

    Digits and Fashion-MNIST take ``sides``, ``train_per_class`` and ``held_out_per_class``;
    photos take ``n_train`` and ``n_held_out`` (images drawn at natural sizes, half photos, half
    graphics).

    Raises
    ------
    ValueError
        An unknown data set, or Fashion-MNIST where it is not installed.
    """
    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {dataset!r}")
    if dataset == "photos":
        from polydom.featurizers.natural import NATURAL_CLASSES, load_natural_images

        images, labels = load_natural_images(n_train + n_held_out, random_state=random_state)
        positions = np.arange(len(images))
        # The generator shuffles its images, so the first n_train are a random draw of both classes.
        return DemoData(images, labels, positions[:n_train], positions[n_train:], positions, NATURAL_CLASSES)
    if dataset == "fashion-mnist":
        from polydom.featurizers.datasets import fashion_mnist_available

        if not fashion_mnist_available():
            raise ValueError("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist); use digits")
    images, labels, train, test = load_split(dataset, tuple(sides), train_per_class, held_out_per_class, random_state)
    classes = tuple(str(c) for c in range(int(labels.max()) + 1))
    if dataset == "fashion-mnist":
        from polydom.featurizers.datasets import FASHION_MNIST_CLASSES as classes
    return DemoData(images, labels, train, test, np.arange(len(images)) // len(sides), tuple(classes))


def size_ranges(sizes: np.ndarray, max_ranges: int = 3) -> tuple[np.ndarray, list[str]]:
    """Each size's range, and the ranges' names: every distinct size its own range when there are
    at most ``max_ranges`` of them (``"28×28"`` for a square), otherwise ``max_ranges`` ranges of
    about as many items each, named by their megapixels."""
    sizes = np.asarray(sizes, dtype=float)
    distinct = np.unique(sizes)
    if len(distinct) <= max_ranges:
        names = [_square(s) for s in distinct]
        return np.searchsorted(distinct, sizes), names
    edges = np.quantile(sizes, np.linspace(0, 1, max_ranges + 1)[1:-1])
    which = np.searchsorted(edges, sizes, side="right")
    bounds = [sizes.min(), *edges, sizes.max()]
    names = [f"{lo / 1e6:.2g}–{hi / 1e6:.2g} MP" for lo, hi in zip(bounds[:-1], bounds[1:])]
    return which, names


def _square(size: float) -> str:
    side = int(round(size ** 0.5))
    return f"{side}×{side}" if side * side == int(size) else f"{size / 1e6:.2g} MP"
