"""Real image data sets that need no network.

* `load_digits_images`: scikit-learn's bundled 8 x 8 handwritten digits,
  each rendered at several square sizes.
* `load_fashion_mnist_images`: Fashion-MNIST from the files Debian's
  ``dataset-fashion-mnist`` package installs, rendered the same way.
* `load_natural_images` (from `polydom.featurizers.natural`): photos and
  flat graphics at natural sizes, 200 x 150 to 2400 x 1600 px, labelled
  photo or graphic; it returns ``(images, labels)``, one size per picture.

The first two return ``(images, labels, sides)`` in *item-major* order: with ``k =
len(sides)``, entries ``i * k ... i * k + k - 1`` are the same source picture
at each side in turn. Keep those together when splitting into train and test
sets (``groups = np.arange(len(images)) // k``), or the test set leaks.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
from scipy.ndimage import affine_transform

from polydom.featurizers.image_features import MIN_SIDE
from polydom.featurizers.natural import NATURAL_CLASSES, load_natural_images

__all__ = [
    "FASHION_MNIST_CLASSES",
    "FASHION_MNIST_DIR",
    "NATURAL_CLASSES",
    "fashion_mnist_available",
    "load_digits_images",
    "load_fashion_mnist",
    "load_fashion_mnist_images",
    "load_natural_images",
    "read_idx",
    "render_at_sides",
]

#: Where Debian's ``dataset-fashion-mnist`` package puts its files.
FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")

FASHION_MNIST_CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)


def render_at_sides(
    pictures,
    sides=(16, 32, 48, 64),
    *,
    random_state=0,
    max_rotation=8.0,
    max_shift=0.04,
    scale_range=(0.92, 1.08),
    noise=0.04,
) -> tuple[list[np.ndarray], np.ndarray]:
    """Render each grey picture at every square side, with jitter and noise.

    Each picture gets one random similarity transform (rotation, scale and
    shift about its centre), applied identically at every side, so the
    renderings at different sides are the same picture rescaled. Each
    rendering then gets its own Gaussian pixel noise and is quantised to
    ``uint8``. Deterministic for a given ``random_state``.

    Parameters
    ----------
    pictures : sequence of 2-D arrays
        Grey pictures with values in ``[0, 1]``.
    sides : sequence of int
        Output sides, each ``>= MIN_SIDE``.
    random_state : int
        Seed for the jitter and noise.
    max_rotation : float
        Largest rotation, in degrees.
    max_shift : float
        Largest shift, as a fraction of the picture's side.
    scale_range : (float, float)
        Range of the zoom factor.
    noise : float
        Standard deviation of the pixel noise, on the ``[0, 1]`` scale.

    Returns
    -------
    images : list of numpy.ndarray
        ``uint8`` arrays, item-major (see the module docstring).
    sides : numpy.ndarray
        The side of each image.
    """
    sides = [int(s) for s in sides]
    if not sides or min(sides) < MIN_SIDE:
        raise ValueError(f"sides must be non-empty and each >= {MIN_SIDE}, got {sides}")
    rng = np.random.default_rng(random_state)
    images: list[np.ndarray] = []
    out_sides: list[int] = []
    for picture in pictures:
        picture = np.asarray(picture, dtype=np.float64)
        angle = np.deg2rad(rng.uniform(-max_rotation, max_rotation))
        zoom = rng.uniform(*scale_range)
        shift = rng.uniform(-max_shift, max_shift, size=2)
        for side in sides:
            matrix = _inverse_map(picture.shape, side, angle, zoom, shift)
            rendered = affine_transform(picture, matrix, output_shape=(side, side),
                                        order=1, mode="grid-constant", cval=0.0)
            rendered = rendered + rng.normal(0.0, noise, size=rendered.shape)
            images.append(np.round(np.clip(rendered, 0.0, 1.0) * 255).astype(np.uint8))
            out_sides.append(side)
    return images, np.array(out_sides, dtype=np.int64)


def _inverse_map(shape, side, angle, zoom, shift) -> np.ndarray:
    """3 x 3 matrix taking output (row, col) to input (row, col) coordinates.

    Output pixel centres are mapped onto the input picture stretched to fill
    the output, then rotated by ``angle``, zoomed by ``zoom`` and shifted by
    ``shift`` (fractions of the side) about the centre.
    """
    height, width = shape
    out_centre = (side - 1) / 2.0
    in_centre = np.array([(height - 1) / 2.0, (width - 1) / 2.0])
    stretch = np.array([height / side, width / side])
    cos, sin = np.cos(angle), np.sin(angle)
    rotation = np.array([[cos, sin], [-sin, cos]]) / zoom
    linear = rotation * stretch[:, None]
    offset = in_centre - linear @ np.array([out_centre, out_centre]) - shift * [height, width]
    matrix = np.eye(3)
    matrix[:2, :2] = linear
    matrix[:2, 2] = offset
    return matrix


def _choose_per_class(labels: np.ndarray, n_per_class, random_state) -> np.ndarray:
    """Indices of up to ``n_per_class`` random items of each class, ascending."""
    if n_per_class is None:
        return np.arange(len(labels))
    if isinstance(n_per_class, bool) or not isinstance(n_per_class, (int, np.integer)):
        raise TypeError(f"n_per_class must be an int or None, got {n_per_class!r}")
    if n_per_class < 1:
        raise ValueError(f"n_per_class must be >= 1, got {n_per_class}")
    rng = np.random.default_rng(random_state)
    chosen = [
        rng.permutation(np.flatnonzero(labels == label))[:n_per_class]
        for label in np.unique(labels)
    ]
    return np.sort(np.concatenate(chosen))


def load_digits_images(sides=(16, 32, 48, 64), n_per_class=None, random_state=0):
    """scikit-learn's handwritten digits, each rendered at several sides.

    The 1,797 bundled 8 x 8 digits (16 grey levels) are scaled to ``[0, 1]``
    and rendered by `render_at_sides`: every digit at every side, with the
    same slight rotation, zoom and shift at all sides and fresh pixel noise
    in each rendering, so features are informative but not perfect.

    Parameters
    ----------
    sides : sequence of int
        Output sides, each ``>= MIN_SIDE``.
    n_per_class : int, optional
        Keep a random ``n_per_class`` digits of each class (all of a class if
        it has fewer); all digits by default.
    random_state : int
        Seed for the subset, jitter and noise.

    Returns
    -------
    images : list of numpy.ndarray
        ``uint8`` arrays of shape ``(side, side)``, item-major: digit ``i``
        at ``sides[j]`` is ``images[i * len(sides) + j]``.
    labels : numpy.ndarray of int64
        Digit (0-9) of each image.
    sides : numpy.ndarray of int64
        Side of each image.
    """
    from sklearn.datasets import load_digits

    sides = [int(s) for s in sides]
    digits = load_digits()
    keep = _choose_per_class(digits.target, n_per_class, random_state)
    pictures = digits.images[keep] / 16.0
    images, image_sides = render_at_sides(pictures, sides, random_state=random_state)
    labels = np.repeat(digits.target[keep].astype(np.int64), len(sides))
    return images, labels, image_sides


def read_idx(path) -> np.ndarray:
    """Read an IDX file (the MNIST format), gzip-compressed or not.

    Only the unsigned-byte element type (code 0x08) is supported, which is
    what MNIST and Fashion-MNIST use.

    Raises
    ------
    ValueError
        If the header is not an unsigned-byte IDX header or the data is
        shorter or longer than the header says.
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        raw = handle.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path} is not an unsigned-byte IDX file")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path}: truncated IDX header")
    shape = tuple(int(d) for d in np.frombuffer(raw, ">u4", count=ndim, offset=4))
    data = np.frombuffer(raw, np.uint8, offset=header)
    if data.size != int(np.prod(shape)):
        raise ValueError(
            f"{path}: header says shape {shape} but holds {data.size} values"
        )
    return data.reshape(shape)


def _fashion_files(directory, subset: str) -> tuple[Path, Path]:
    if subset not in ("train", "t10k"):
        raise ValueError(f"subset must be 'train' or 't10k', got {subset!r}")
    directory = FASHION_MNIST_DIR if directory is None else Path(directory)
    return (
        directory / f"{subset}-images-idx3-ubyte.gz",
        directory / f"{subset}-labels-idx1-ubyte.gz",
    )


def fashion_mnist_available(directory=None, subset: str = "t10k") -> bool:
    """Whether the Fashion-MNIST files of ``subset`` are in ``directory``
    (`FASHION_MNIST_DIR` by default)."""
    return all(path.is_file() for path in _fashion_files(directory, subset))


def load_fashion_mnist(directory=None, *, subset: str = "t10k"):
    """Read Fashion-MNIST's 28 x 28 pictures and labels.

    Parameters
    ----------
    directory : path, optional
        Folder holding ``{subset}-images-idx3-ubyte.gz`` and
        ``{subset}-labels-idx1-ubyte.gz``; `FASHION_MNIST_DIR` by default
        (``apt-get install dataset-fashion-mnist`` puts them there).
    subset : {'t10k', 'train'}
        The 10,000-item test set or the 60,000-item training set.

    Returns
    -------
    pictures : numpy.ndarray of uint8, shape (N, 28, 28)
    labels : numpy.ndarray of int64, shape (N,)
        Class indices into `FASHION_MNIST_CLASSES`.

    Raises
    ------
    FileNotFoundError
        If the files are missing.
    ValueError
        If they are malformed or disagree in length.
    """
    images_path, labels_path = _fashion_files(directory, subset)
    missing = [str(p) for p in (images_path, labels_path) if not p.is_file()]
    if missing:
        raise FileNotFoundError(
            "Fashion-MNIST files not found: " + ", ".join(missing)
            + " (install Debian's dataset-fashion-mnist package or pass directory=)"
        )
    pictures = read_idx(images_path)
    labels = read_idx(labels_path).astype(np.int64)
    if pictures.ndim != 3 or labels.ndim != 1 or len(pictures) != len(labels):
        raise ValueError(
            f"Fashion-MNIST files disagree: images {pictures.shape}, labels {labels.shape}"
        )
    return pictures, labels


def load_fashion_mnist_images(
    sides=(28, 56, 84, 112), n_per_class=10, random_state=0, *, directory=None,
    subset: str = "t10k",
):
    """Fashion-MNIST pictures rendered at several sides, like the digits.

    Same rendering and return layout as `load_digits_images`. By default 10
    pictures per class are kept, since rendering all 10,000 at 4 sides takes
    a while; pass ``n_per_class=None`` for all.

    Raises
    ------
    FileNotFoundError
        If the files are missing (see `load_fashion_mnist`).
    """
    sides = [int(s) for s in sides]
    pictures, labels = load_fashion_mnist(directory, subset=subset)
    keep = _choose_per_class(labels, n_per_class, random_state)
    images, image_sides = render_at_sides(
        pictures[keep] / 255.0, sides, random_state=random_state
    )
    return images, np.repeat(labels[keep], len(sides)), image_sides
