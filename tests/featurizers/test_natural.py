"""The natural-size photo-or-graphic generator: deterministic, spans sizes and shapes, balanced."""

import hashlib
import time

import numpy as np
import pytest

from polydom.featurizers.datasets import NATURAL_CLASSES, load_natural_images
from polydom.featurizers.natural import NATURAL_MAX_SHAPE, NATURAL_MIN_SHAPE, natural_photo_sources

N = 40  # small enough to be quick, large enough for every stratum to show


@pytest.fixture(scope="module")
def natural():
    return load_natural_images(N, random_state=7)


def _digest(image: np.ndarray) -> str:
    return hashlib.sha1(image.tobytes() + repr(image.shape).encode()).hexdigest()


def test_images_are_rgb_uint8_with_binary_labels(natural):
    images, labels = natural
    assert len(images) == len(labels) == N
    assert labels.dtype == np.int64 and set(labels.tolist()) == {0, 1}
    assert NATURAL_CLASSES == ("graphic", "photo")
    for image in images:
        assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3


def test_same_seed_same_images_other_seed_other_images(natural):
    images, labels = natural
    again, again_labels = load_natural_images(N, random_state=7)
    assert np.array_equal(labels, again_labels)
    assert [_digest(a) for a in images] == [_digest(b) for b in again]
    other, _ = load_natural_images(N, random_state=8)
    assert {_digest(a) for a in images}.isdisjoint(_digest(b) for b in other)


def test_labels_are_balanced():
    for n in (2, 9, N):
        _, labels = load_natural_images(n, random_state=1, max_shape=(300, 400))
        assert labels.sum() == (n + 1) // 2  # the odd one out is a photo
        assert len(labels) - labels.sum() == n // 2


def test_sizes_and_aspect_ratios_span_the_range_in_both_classes(natural):
    images, labels = natural
    lo_px = NATURAL_MIN_SHAPE[0] * NATURAL_MIN_SHAPE[1]
    hi_px = NATURAL_MAX_SHAPE[0] * NATURAL_MAX_SHAPE[1]
    for label in (0, 1):
        shapes = np.array([im.shape[:2] for im, y in zip(images, labels) if y == label])
        pixels = shapes[:, 0] * shapes[:, 1]
        ratio = shapes[:, 1] / shapes[:, 0]
        # Twenty log strata per class: the extreme strata reach within a factor 1.3 of the ends
        # (the largest less where a long side meets the 2400 px cap).
        assert pixels.min() <= 1.3 * lo_px and pixels.max() >= 0.6 * hi_px, (pixels.min(), pixels.max())
        assert shapes.min() >= min(NATURAL_MIN_SHAPE) and shapes.max() <= max(NATURAL_MAX_SHAPE)
        assert ratio.min() < 0.5 and ratio.max() > 2.0  # portrait, landscape ...
        assert np.any((ratio > 0.8) & (ratio < 1.25))  # ... and about square


def test_no_two_images_are_the_same_crop(natural):
    images, labels = natural
    assert len({_digest(im) for im in images}) == N
    photos = [im for im, y in zip(images, labels) if y == 1]
    # Crops of different places look different, not just resized: their mean colours differ.
    means = np.array([im.reshape(-1, 3).mean(axis=0) for im in photos])
    assert len(np.unique(np.round(means), axis=0)) == len(photos)


def test_graphics_are_flat_and_photos_are_not(natural):
    images, labels = natural

    def top_colours_share(image, k=8):
        # Share of the pixels taken by the image's k commonest colours.
        flat = image[::4, ::4].reshape(-1, 3)
        codes = (flat[:, 0].astype(np.int64) << 16) | (flat[:, 1].astype(np.int64) << 8) | flat[:, 2]
        counts = np.sort(np.unique(codes, return_counts=True)[1])[::-1]
        return counts[:k].sum() / len(codes)

    shares = np.array([top_colours_share(im) for im in images])
    assert shares[labels == 0].min() > 0.8, "a graphic is not made of flat fills"
    assert shares[labels == 1].max() < 0.5, "a photo is as flat as a graphic"


def test_photos_come_from_several_bundled_sources():
    sources = natural_photo_sources()
    for name in ("astronaut", "coffee", "chelsea", "rocket", "china", "flower"):
        assert name in sources


def test_a_hundred_and_twenty_images_take_seconds():
    started = time.perf_counter()
    images, labels = load_natural_images(120, random_state=0)
    elapsed = time.perf_counter() - started
    assert len(images) == 120 and labels.sum() == 60
    assert elapsed < 20.0, f"{elapsed:.1f} s for 120 images"  # about 0.5 s on an idle core


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="n_images"):
        load_natural_images(1)
    with pytest.raises(ValueError, match="n_images"):
        load_natural_images(True)
    with pytest.raises(ValueError, match="max_aspect"):
        load_natural_images(4, max_aspect=0.5)
    with pytest.raises(ValueError, match="larger than"):
        load_natural_images(4, min_shape=(500, 500), max_shape=(100, 100))
