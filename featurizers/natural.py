"""Natural-size images without a download: photos and flat graphics, labelled.

`load_natural_images` makes a photo-or-graphic data set whose images have the
sizes users' pictures have -- from about 200 x 150 to 2400 x 1600 pixels, in
portrait, square and landscape shapes -- so that feature costs, timing passes
and extraction can be tried at natural sizes on any machine.

* Photos (label 1) are crops of the colour photographs shipped inside the
  scikit-image wheel (astronaut, coffee, chelsea, rocket, ...) and the
  scikit-learn wheel (china, flower), rescaled to the target size.
* Graphics (label 0) are drawn with Pillow: flat colour fills, shapes, text
  and bar charts, the kind of picture a slide or a logo is.

Both classes draw their sizes and aspect ratios from the same stratified
distribution, so size says nothing about the label. Everything is derived
from ``random_state``: the same seed gives the same images, bit for bit, on
the same library versions.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np

__all__ = ["NATURAL_CLASSES", "NATURAL_MAX_SHAPE", "NATURAL_MIN_SHAPE", "load_natural_images", "natural_photo_sources"]

#: Label names: ``NATURAL_CLASSES[label]``.
NATURAL_CLASSES = ("graphic", "photo")

#: Smallest and largest default shapes, ``(height, width)`` of a landscape image.
NATURAL_MIN_SHAPE = (150, 200)
NATURAL_MAX_SHAPE = (1600, 2400)

# Colour photographs inside the scikit-image wheel (file names in skimage/data).
# Read from the package directory, never through skimage.data's fetchers, which
# may try the network for files a wheel does not ship.
_SKIMAGE_PHOTOS = (
    "astronaut.png", "coffee.png", "chelsea.png", "rocket.jpg", "hubble_deep_field.jpg",
    "ihc.png", "retina.jpg", "motorcycle_left.png",
)
# At least this many sources, or the photos are too few to vary.
_MIN_SOURCES = 4


@functools.lru_cache(maxsize=1)
def _photo_sources() -> tuple[tuple[str, np.ndarray], ...]:
    """The bundled colour photos as ``(name, uint8 RGB array)``, in a fixed order."""
    from PIL import Image

    import skimage.data

    found = []
    base = Path(skimage.data.__file__).parent
    for name in _SKIMAGE_PHOTOS:
        path = base / name
        if path.is_file():  # a wheel without it: use the others
            with Image.open(path) as im:
                found.append((path.stem, np.asarray(im.convert("RGB"))))
    from sklearn.datasets import load_sample_images

    sample = load_sample_images()
    for filename, array in zip(sample.filenames, sample.images):
        found.append((Path(filename).stem, np.ascontiguousarray(array, dtype=np.uint8)))
    if len(found) < _MIN_SOURCES:
        raise RuntimeError(f"only {len(found)} bundled photos found (need {_MIN_SOURCES}); "
                           "are scikit-image and scikit-learn installed in full?")
    for _, array in found:  # what the generator relies on
        assert array.dtype == np.uint8 and array.ndim == 3 and array.shape[2] == 3
    return tuple(found)


def natural_photo_sources() -> list[str]:
    """Names of the bundled photos the generator crops from, in the order it uses them."""
    return [name for name, _ in _photo_sources()]


def _shapes(n: int, rng: np.random.Generator, min_shape, max_shape, max_aspect: float) -> list[tuple[int, int]]:
    """``n`` image shapes ``(height, width)``, stratified in log area and log aspect ratio.

    Areas run from ``min_shape``'s to ``max_shape``'s pixel count and aspect ratios
    (width / height) from ``1 / max_aspect`` to ``max_aspect``, each in ``n`` equal log
    strata visited in an independent random order, so a small ``n`` already spans both
    ranges. A shape is then scaled to keep its long side within the largest side and its
    short side at least the smallest.
    """
    lo_area, hi_area = math.log(min_shape[0] * min_shape[1]), math.log(max_shape[0] * max_shape[1])
    lo_side, hi_side = min(min_shape), max(max_shape)
    log_aspect = math.log(max_aspect)
    area_u = (rng.permutation(n) + rng.random(n)) / n
    aspect_u = (rng.permutation(n) + rng.random(n)) / n
    out = []
    for a, r in zip(area_u, aspect_u):
        area = math.exp(lo_area + a * (hi_area - lo_area))
        ratio = math.exp((2 * r - 1) * log_aspect)  # width / height
        height, width = math.sqrt(area / ratio), math.sqrt(area * ratio)
        shrink = min(1.0, hi_side / max(height, width))  # long side within bounds first
        height, width = height * shrink, width * shrink
        grow = max(1.0, lo_side / min(height, width))
        height, width = min(hi_side, round(height * grow)), min(hi_side, round(width * grow))
        out.append((int(height), int(width)))
    return out


def _photo(shape: tuple[int, int], rng: np.random.Generator, sources) -> np.ndarray:
    """A crop of one bundled photo with the aspect ratio of ``shape``, rescaled to it."""
    from PIL import Image

    height, width = shape
    _, source = sources[int(rng.integers(len(sources)))]
    src_h, src_w = source.shape[:2]
    # The largest box of the target's aspect ratio inside the source, then a random
    # fraction of it (at least a third of each side, so a crop is still a scene).
    scale = min(src_h / height, src_w / width) * rng.uniform(0.35, 1.0)
    box_h, box_w = max(8, round(height * scale)), max(8, round(width * scale))
    box_h, box_w = min(box_h, src_h), min(box_w, src_w)
    top = int(rng.integers(src_h - box_h + 1))
    left = int(rng.integers(src_w - box_w + 1))
    image = Image.fromarray(source[top : top + box_h, left : left + box_w])
    if rng.random() < 0.5:
        image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    return np.asarray(image.resize((width, height), Image.Resampling.BILINEAR))


def _palette(rng: np.random.Generator, k: int) -> list[tuple[int, int, int]]:
    """``k`` flat colours: saturated, pastel or grey, as slides and logos use."""
    colours = []
    for _ in range(k):
        kind = rng.random()
        if kind < 0.5:  # saturated: one channel high, one low
            c = rng.permutation([int(rng.integers(200, 256)), int(rng.integers(0, 60)), int(rng.integers(0, 256))])
        elif kind < 0.8:  # pastel
            c = rng.integers(170, 256, size=3)
        else:  # grey
            c = np.full(3, int(rng.integers(0, 256)))
        colours.append(tuple(int(v) for v in c))
    return colours


def _graphic(shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """A flat graphic drawn with Pillow: shapes, text, a chart, or all three."""
    from PIL import Image, ImageDraw, ImageFont

    height, width = shape
    colours = _palette(rng, int(rng.integers(3, 7)))
    image = Image.new("RGB", (width, height), colours[0])
    draw = ImageDraw.Draw(image)
    short = min(height, width)
    kind = ("shapes", "text", "chart", "mixed")[int(rng.integers(4))]

    def colour():
        return colours[int(rng.integers(1, len(colours)))]

    def box(max_frac: float):
        w = int(rng.integers(max(2, width // 20), max(3, int(width * max_frac)) + 1))
        h = int(rng.integers(max(2, height // 20), max(3, int(height * max_frac)) + 1))
        x = int(rng.integers(0, max(1, width - w)))
        y = int(rng.integers(0, max(1, height - h)))
        return [x, y, x + w, y + h]

    if rng.random() < 0.4:  # a flat band, as a title bar or a split background
        band = int(height * rng.uniform(0.1, 0.3))
        draw.rectangle([0, 0, width, band], fill=colour())
    if kind in ("shapes", "mixed"):
        for _ in range(int(rng.integers(3, 12))):
            figure = rng.integers(4)
            if figure == 0:
                draw.rectangle(box(0.5), fill=colour())
            elif figure == 1:
                draw.ellipse(box(0.5), fill=colour())
            elif figure == 2:
                points = [(int(rng.integers(width)), int(rng.integers(height))) for _ in range(int(rng.integers(3, 7)))]
                draw.polygon(points, fill=colour())
            else:
                x0, y0, x1, y1 = box(0.9)
                draw.line([x0, y0, x1, y1], fill=colour(), width=max(1, short // int(rng.integers(40, 150))))
    if kind in ("chart", "mixed"):
        left, top, right, bottom = int(width * 0.1), int(height * 0.15), int(width * 0.9), int(height * 0.85)
        bars = int(rng.integers(3, 10))
        step = (right - left) / bars
        for i in range(bars):
            h = rng.uniform(0.1, 1.0) * (bottom - top)
            draw.rectangle([int(left + i * step + step * 0.15), int(bottom - h), int(left + (i + 0.85) * step), bottom],
                           fill=colour())
        axis = max(1, short // 200)
        draw.line([left, top, left, bottom, right, bottom], fill=colours[-1], width=axis)
    if kind in ("text", "mixed", "chart"):
        size = max(8, int(short * rng.uniform(0.04, 0.12)))
        font = ImageFont.load_default(size=size)
        words = ("Quarterly", "results", "Sales", "Agenda", "Welcome", "Total", "Q3", "2024", "Open", "Menu",
                 "Contact", "Revenue", "Plan", "Team", "Next steps", "Overview", "Summary", "Notes")
        y = int(height * rng.uniform(0.02, 0.2))
        for _ in range(int(rng.integers(1, 7))):
            line = " ".join(words[int(i)] for i in rng.integers(len(words), size=int(rng.integers(1, 5))))
            draw.text((int(width * rng.uniform(0.03, 0.3)), y), line, fill=colour(), font=font)
            y += int(size * rng.uniform(1.2, 2.0))
            if y > height - size:
                break
    return np.asarray(image)


def load_natural_images(
    n_images: int = 120,
    *,
    random_state: int = 0,
    min_shape: tuple[int, int] = NATURAL_MIN_SHAPE,
    max_shape: tuple[int, int] = NATURAL_MAX_SHAPE,
    max_aspect: float = 2.5,
) -> tuple[list[np.ndarray], np.ndarray]:
    """Photos and flat graphics at natural sizes, labelled photo (1) or graphic (0).

    Half the images (the extra one, if ``n_images`` is odd, a photo) are crops of
    the photos bundled with scikit-image and scikit-learn (`natural_photo_sources`),
    rescaled; the other half are drawn with Pillow (flat fills, shapes, text, bar
    charts). Each class draws its shapes from the same stratified distribution:
    pixel counts log-uniform from ``min_shape``'s to ``max_shape``'s, aspect ratios
    (width / height) log-uniform from ``1 / max_aspect`` to ``max_aspect``, sides
    kept within ``[min(min_shape), max(max_shape)]``. Nothing is downloaded.

    Parameters
    ----------
    n_images : int, default 120
        Number of images, ``>= 2``.
    random_state : int, default 0
        Seed of every choice: the same seed gives the same images.
    min_shape, max_shape : (int, int)
        ``(height, width)`` of the smallest and largest images' areas; the
        defaults are 150 x 200 and 1600 x 2400 px.
    max_aspect : float, default 2.5
        Most elongated aspect ratio, ``>= 1``; both orientations occur.

    Returns
    -------
    images : list of numpy.ndarray
        ``uint8`` arrays of shape ``(height, width, 3)`` (RGB), in random order.
    labels : numpy.ndarray of int64
        1 for a photo, 0 for a graphic (`NATURAL_CLASSES`).

    Notes
    -----
    The default set holds about 95 MP (some 280 MB); generation takes a few
    seconds, most of it rescaling photos.
    """
    if isinstance(n_images, bool) or not isinstance(n_images, (int, np.integer)) or n_images < 2:
        raise ValueError(f"n_images must be an integer >= 2, got {n_images!r}")
    if not (isinstance(max_aspect, (int, float)) and math.isfinite(max_aspect) and max_aspect >= 1):
        raise ValueError(f"max_aspect must be a finite number >= 1, got {max_aspect!r}")
    min_shape = tuple(int(v) for v in min_shape)
    max_shape = tuple(int(v) for v in max_shape)
    if len(min_shape) != 2 or len(max_shape) != 2 or min(min_shape) < 8:
        raise ValueError(f"min_shape and max_shape are (height, width) of at least 8 px, got {min_shape}, {max_shape}")
    if min_shape[0] * min_shape[1] > max_shape[0] * max_shape[1]:
        raise ValueError(f"min_shape {min_shape} is larger than max_shape {max_shape}")
    n_images = int(n_images)
    rng = np.random.default_rng(random_state)
    sources = _photo_sources()
    n_photos = (n_images + 1) // 2
    n_graphics = n_images - n_photos
    # One stream per class, so the photos do not change when the graphics' drawing changes.
    photo_rng, graphic_rng, order_rng = (np.random.default_rng(s) for s in rng.integers(2**63, size=3))
    photos = [_photo(shape, photo_rng, sources)
              for shape in _shapes(n_photos, photo_rng, min_shape, max_shape, max_aspect)]
    graphics = [_graphic(shape, graphic_rng)
                for shape in _shapes(n_graphics, graphic_rng, min_shape, max_shape, max_aspect)]
    images = photos + graphics
    labels = np.array([1] * n_photos + [0] * n_graphics, dtype=np.int64)
    order = order_rng.permutation(n_images)
    images = [images[i] for i in order]
    labels = labels[order]
    assert all(im.dtype == np.uint8 and im.ndim == 3 and im.shape[2] == 3 for im in images)
    return images, labels
