"""Image validation and the built-in image feature functions.

Every feature function takes one image and returns a 1-D ``float64`` vector
whose length is fixed (it does not depend on the image's size), is finite, and
is a deterministic function of the pixels.

Accepted images are 2-D grey-level arrays ``(H, W)`` or colour arrays
``(H, W, 3)`` (RGB) and ``(H, W, 4)`` (RGBA, alpha ignored), with ``H, W >=
MIN_SIDE``. Their dtype is one of ``bool``, ``uint8``, ``uint16`` (scaled by
the dtype's maximum) or ``float16/32/64`` with values in ``[0, 1]``.

The *item size* of an image is its pixel count ``n = H * W``. Apart from
``size_meta`` (constant time) every feature touches every pixel, so its cost
grows with ``n``: about linearly for most, ``n log n`` for ``fft_bands``, and
linearly with a large constant (the Gabor kernels' area) for ``gabor``. These
costs are what polydom bounds by polynomials in ``n``.

The features that work on grey levels take them as the keyword ``grey`` (the ``grey`` step,
``polydom.featurizers.STEPS``), so that one conversion serves them all; called without it, each
converts the image itself.
"""

from __future__ import annotations

import numpy as np
from PIL import Image
from skimage.color import rgb2gray
from skimage.feature import (
    canny,
    corner_harris,
    corner_peaks,
    graycomatrix,
    graycoprops,
    hog,
    local_binary_pattern,
)
from skimage.filters import gabor
from skimage.util import img_as_float64

from .errors import ImageError, ImageTypeError

__all__ = [
    "MIN_SIDE",
    "as_gray_float",
    "edge_density",
    "fft_bands",
    "gabor_energy",
    "glcm_stats",
    "harris_corners",
    "hog_pooled",
    "intensity_hist",
    "is_colour",
    "item_size",
    "lbp_hist",
    "size_meta",
    "thumbnail",
    "validate_image",
]

#: Smallest accepted height and width. The pooled features split the image
#: into a 4 x 4 grid and HOG into 8 x 8 cells, which needs at least 8 pixels
#: along each axis.
MIN_SIDE = 8

_GRID = 4
_FLOAT_DTYPES = (np.float16, np.float32, np.float64)
_UINT_DTYPES = (np.uint8, np.uint16)


# --------------------------------------------------------------------------
# Validation and conversion
# --------------------------------------------------------------------------


def _where(index) -> str:
    return "image" if index is None else f"image (item {index})"


def validate_image(image, *, index=None) -> np.ndarray:
    """Check that ``image`` is an image the features accept.

    Parameters
    ----------
    image : array_like
        Candidate image, ``(H, W)``, ``(H, W, 3)`` or ``(H, W, 4)``.
    index : int, optional
        Position of the image in a collection; named in the error message.

    Returns
    -------
    numpy.ndarray
        ``image`` as an array (not copied when it already was one).

    Raises
    ------
    TypeError
        If the dtype is not bool, uint8, uint16 or float16/32/64 (object,
        complex, signed integer, string, ... arrays are refused).
    ValueError
        If the image does not have 2 dimensions (or 3 with 3 or 4 channels),
        is empty or smaller than ``MIN_SIDE`` on a side, holds NaN or
        infinite pixels, or holds float pixels outside ``[0, 1]``.
    """
    where = _where(index)
    try:
        array = np.asarray(image)
    except (TypeError, ValueError) as exc:  # e.g. ragged nested lists
        raise ImageTypeError(f"{where} cannot be read as an array: {exc}") from exc
    dtype = array.dtype
    if not (dtype == np.bool_ or dtype in _UINT_DTYPES or dtype in _FLOAT_DTYPES):
        raise ImageTypeError(
            f"{where} has dtype {dtype}; expected bool, uint8, uint16 or a "
            "float dtype with values in [0, 1] (convert integer images with "
            ".astype(np.uint8))"
        )
    if array.ndim == 3:
        if array.shape[2] not in (3, 4):
            raise ImageError(
                f"{where} has shape {array.shape}; a 3-D image must have 3 (RGB) "
                "or 4 (RGBA) channels"
            )
    elif array.ndim != 2:
        raise ImageError(
            f"{where} has {array.ndim} dimensions (shape {array.shape}); "
            "expected (H, W), (H, W, 3) or (H, W, 4)"
        )
    height, width = array.shape[:2]
    if height == 0 or width == 0:
        raise ImageError(f"{where} is empty (shape {array.shape})")
    if height < MIN_SIDE or width < MIN_SIDE:
        raise ImageError(
            f"{where} is {height} x {width}; both sides must be at least {MIN_SIDE}"
        )
    if dtype in _FLOAT_DTYPES:
        if not np.all(np.isfinite(array)):
            bad = "NaN" if np.isnan(array).any() else "infinite"
            raise ImageError(f"{where} has {bad} pixels")
        low, high = array.min(), array.max()
        if low < 0 or high > 1:
            raise ImageError(
                f"{where} has float pixels in [{low:g}, {high:g}]; float images "
                "must lie in [0, 1]"
            )
    return array


def item_size(image) -> int:
    """Return the item size of ``image``: its pixel count ``H * W``.

    Channels do not count: an RGB image of ``H x W`` has size ``H * W``.
    Only the shape is inspected, so this is constant time.

    Raises
    ------
    ValueError
        If ``image`` is not 2-D, or 3-D with 3 or 4 channels.
    """
    shape = np.shape(image)
    if len(shape) == 2 or (len(shape) == 3 and shape[2] in (3, 4)):
        return int(shape[0]) * int(shape[1])
    raise ImageError(
        f"image has shape {shape}; expected (H, W), (H, W, 3) or (H, W, 4)"
    )


def as_gray_float(image) -> np.ndarray:
    """Return a valid image as a 2-D ``float64`` grey-level array in ``[0, 1]``.

    The image is assumed valid (see `validate_image`); a 2-D ``float64`` image
    is returned as is, without a copy.
    """
    array = np.asarray(image)
    if array.ndim == 3:
        return img_as_float64(rgb2gray(array[..., :3]))
    # What img_as_float64 computes, without its checks: on small grey images they cost more
    # than the conversion, and the shared ``grey`` step precedes every feature of a set.
    if array.dtype == np.float64:
        return array
    if array.dtype.kind == "u":
        return np.multiply(array, 1.0 / np.iinfo(array.dtype).max, dtype=np.float64)
    return array.astype(np.float64)


def is_colour(image) -> bool:
    """Whether a valid image has colour channels, so that converting it to grey levels is work
    (a grey image is only cast to float)."""
    return np.ndim(image) == 3


def _grey(image, grey) -> np.ndarray:
    """The ``grey`` step's output when the caller prepared it (several features of one image share
    one conversion), otherwise :func:`as_gray_float` of ``image``."""
    return as_gray_float(image) if grey is None else grey


def _grid_means(values: np.ndarray, grid: int = _GRID) -> np.ndarray:
    """Mean of ``values`` (``(H, W)`` or ``(H, W, C)``) over a ``grid x grid``
    partition of its first two axes into near-equal blocks.

    Returns an array of shape ``(grid, grid)`` or ``(grid, grid, C)``.
    """
    height, width = values.shape[:2]
    rows = np.linspace(0, height, grid + 1).astype(np.intp)
    cols = np.linspace(0, width, grid + 1).astype(np.intp)
    # reduceat needs strictly increasing starts, i.e. at least one row and
    # column per block; MIN_SIDE >= grid guarantees it.
    sums = np.add.reduceat(np.add.reduceat(values, rows[:-1], axis=0), cols[:-1], axis=1)
    counts = np.outer(np.diff(rows), np.diff(cols))
    if values.ndim == 3:
        counts = counts[..., None]
    return sums / counts


# --------------------------------------------------------------------------
# Features, roughly from cheapest to most expensive
# --------------------------------------------------------------------------


def size_meta(image) -> np.ndarray:
    """Height, width and aspect ratio (width / height). Length 3, O(1)."""
    height, width = np.shape(image)[:2]
    return np.array([height, width, width / height], dtype=np.float64)


def intensity_hist(image, grey=None) -> np.ndarray:
    """Grey-level histogram with 16 bins over ``[0, 1]``, as pixel fractions.

    Length 16; the entries sum to 1.
    """
    gray = _grey(image, grey)
    counts, _ = np.histogram(gray, bins=16, range=(0.0, 1.0))
    return counts / gray.size


def thumbnail(image, grey=None) -> np.ndarray:
    """The image box-filtered down to 8 x 8 pixels (Pillow), row-major.

    Length 64, values in ``[0, 1]``.
    """
    gray = _grey(image, grey).astype(np.float32)
    small = Image.fromarray(gray).resize((8, 8), Image.Resampling.BOX)
    return np.asarray(small, dtype=np.float64).ravel()


def fft_bands(image, grey=None) -> np.ndarray:
    """Share of spectral energy in 8 radial and 4 angular frequency bands.

    The mean is removed first, so the DC term carries no energy. Radial bands
    split ``[0, Nyquist]`` evenly (the corners beyond Nyquist fall in the
    last band); angular bands split orientations ``(-90, 90]`` degrees into
    four wedges. Each group sums to 1, or is all zeros for a flat image.
    Length 12; cost O(n log n).
    """
    gray = _grey(image, grey)
    height, width = gray.shape
    power = np.abs(np.fft.rfft2(gray - gray.mean())) ** 2
    fy = np.fft.fftfreq(height)[:, None]
    fx = np.fft.rfftfreq(width)[None, :]
    radius = np.hypot(fy, fx) / 0.5
    radial = np.minimum((radius * 8).astype(np.intp), 7)
    angle = np.arctan2(fy, fx)  # fx >= 0, so angle lies in [-pi/2, pi/2]
    angular = np.minimum(((angle + np.pi / 2) / np.pi * 4).astype(np.intp), 3)
    flat_power = power.ravel()
    radial_energy = np.bincount(radial.ravel(), weights=flat_power, minlength=8)
    angular_energy = np.bincount(angular.ravel(), weights=flat_power, minlength=4)
    total = flat_power.sum()
    if total <= 0:
        return np.zeros(12)
    return np.concatenate([radial_energy, angular_energy]) / total


def edge_density(image, grey=None) -> np.ndarray:
    """Fraction of Canny edge pixels (sigma 1) in each cell of a 4 x 4 grid.

    Length 16, values in ``[0, 1]``.
    """
    edges = canny(_grey(image, grey), sigma=1.0)
    return _grid_means(edges.astype(np.float64)).ravel()


def lbp_hist(image, grey=None) -> np.ndarray:
    """Uniform local binary pattern (P=8, R=1) histograms on a 2 x 2 grid.

    The 10 uniform codes are counted in each quadrant, as fractions of the
    quadrant's pixels. Length 40 (quadrant-major, code-minor).
    """
    gray = _grey(image, grey)
    # LBP compares neighbours for equality, which is only meaningful on
    # quantised levels; 8 bits match the usual uint8 input.
    levels = np.round(gray * 255).astype(np.uint8)
    codes = local_binary_pattern(levels, P=8, R=1, method="uniform").astype(np.intp)
    one_hot = np.eye(10)[codes]  # (H, W, 10)
    return _grid_means(one_hot, grid=2).ravel()


_GLCM_PROPS = ("contrast", "dissimilarity", "homogeneity", "energy", "correlation", "ASM")


def glcm_stats(image, grey=None) -> np.ndarray:
    """Haralick statistics of the grey-level co-occurrence matrix.

    The image is quantised to 32 levels; the symmetric, normalised matrix is
    taken at distances 1 and 2 and angles 0, 45, 90 and 135 degrees. Each of
    contrast, dissimilarity, homogeneity, energy, correlation and ASM is
    averaged over the angles. Length 12 (property-major, distance-minor).
    """
    gray = _grey(image, grey)
    levels = np.minimum((gray * 32).astype(np.uint8), 31)
    matrix = graycomatrix(
        levels,
        distances=[1, 2],
        angles=[0, np.pi / 4, np.pi / 2, 3 * np.pi / 4],
        levels=32,
        symmetric=True,
        normed=True,
    )
    stats = np.stack([graycoprops(matrix, prop).mean(axis=1) for prop in _GLCM_PROPS])
    return np.nan_to_num(stats.ravel(), nan=0.0, posinf=0.0, neginf=0.0)


def harris_corners(image, grey=None) -> np.ndarray:
    """Harris corner response pooled on a 4 x 4 grid, plus corner density.

    The first 16 entries are the mean positive Harris response (sigma 1) per
    grid cell; the last is the number of response peaks (at least 10% of the
    strongest, 2 pixels apart) per 100 pixels. Length 17.
    """
    gray = _grey(image, grey)
    response = corner_harris(gray, sigma=1.0)
    pooled = _grid_means(np.maximum(response, 0.0)).ravel()
    peaks = corner_peaks(response, min_distance=2, threshold_rel=0.1)
    density = 100.0 * len(peaks) / gray.size
    return np.append(pooled, density)


def hog_pooled(image, grey=None) -> np.ndarray:
    """Histogram of oriented gradients pooled to a fixed 4 x 4 x 9 layout.

    The image is divided into 4 to 8 cells per side (the cell size scales
    with the image, so the cell count and cost stay proportional), each cell's 9-bin orientation histogram is L2-Hys normalised
    on its own, and the cell histograms are averaged over a 4 x 4 grid.
    Length 144 (row, column, orientation).
    """
    gray = _grey(image, grey)
    height, width = gray.shape
    # ceil keeps the cell count in [4, 8] for any side >= MIN_SIDE, so the
    # 4 x 4 pooling grid always has at least one cell per block.
    cell = (-(-height // 8), -(-width // 8))
    cells = hog(
        gray,
        orientations=9,
        pixels_per_cell=cell,
        cells_per_block=(1, 1),
        block_norm="L2-Hys",
        feature_vector=False,
    )
    cells = cells.reshape(cells.shape[0], cells.shape[1], 9)
    return _grid_means(cells).ravel()


_GABOR_FREQUENCIES = (0.15, 0.3)
_GABOR_THETAS = (0.0, np.pi / 4, np.pi / 2, 3 * np.pi / 4)


def gabor_energy(image, grey=None) -> np.ndarray:
    """GIST-like Gabor energies: a bank of 8 filters pooled on a 4 x 4 grid.

    Filters have frequencies 0.15 and 0.3 cycles per pixel and orientations
    0, 45, 90 and 135 degrees; each filter's response magnitude is averaged
    in each grid cell. Spatial convolution with kernels up to 23 x 23 pixels
    makes this the most expensive built-in feature. Length 128
    (frequency, orientation, row, column).
    """
    gray = _grey(image, grey)
    energies = []
    for frequency in _GABOR_FREQUENCIES:
        for theta in _GABOR_THETAS:
            real, imag = gabor(gray, frequency=frequency, theta=theta)
            energies.append(_grid_means(np.hypot(real, imag)).ravel())
    return np.concatenate(energies)
