"""Features, the registry, compute_features and the bundled data sets."""

import gzip

import numpy as np
import pytest
from skimage import data
from skimage.color import rgb2gray
from skimage.transform import resize

from polydom.featurizers import (
    MIN_SIDE,
    REGISTRY,
    Feature,
    FeatureError,
    UnknownFeatureError,
    compute_features,
    default_features,
    get_feature,
    item_size,
    register_feature,
    unregister_feature,
    validate_image,
)
from polydom.featurizers.datasets import (
    fashion_mnist_available,
    load_digits_images,
    load_fashion_mnist,
    load_fashion_mnist_images,
    read_idx,
)

FEATURES = default_features()
NAMES = [f.name for f in FEATURES]


@pytest.fixture(scope="module")
def camera():
    return data.camera()  # 512 x 512 uint8


@pytest.fixture(scope="module")
def astronaut():
    return data.astronaut()  # 512 x 512 x 3 uint8


def _shapes():
    # Square and oblong, the smallest accepted and odd sizes.
    return [(MIN_SIDE, MIN_SIDE), (13, 21), (32, 32), (64, 40)]


# --------------------------------------------------------------------------
# Feature vectors
# --------------------------------------------------------------------------


def test_at_least_eight_distinct_builtin_features():
    assert len(FEATURES) >= 8
    assert len(set(NAMES)) == len(NAMES)
    assert all(f.dimension is not None and f.description for f in FEATURES)


@pytest.mark.parametrize("feature", FEATURES, ids=NAMES)
def test_length_fixed_across_sizes_and_deterministic(feature, camera):
    for shape in _shapes():
        image = resize(camera, shape, anti_aliasing=True)
        first = feature(image)
        again = feature(image.copy())
        assert first.dtype == np.float64 and first.shape == (feature.dimension,)
        assert np.all(np.isfinite(first))
        np.testing.assert_array_equal(first, again)


@pytest.mark.parametrize("feature", FEATURES, ids=NAMES)
def test_accepts_uint8_rgb_bool_and_flat_images(feature, astronaut):
    rgb = astronaut[::16, ::16]  # 32 x 32 x 3 uint8
    grey = rgb2gray(rgb)
    # RGB is converted to grey the same way rgb2gray does.
    np.testing.assert_allclose(feature(rgb), feature(grey), rtol=1e-9, atol=1e-12)
    rgba = np.dstack([rgb, np.full(rgb.shape[:2], 255, np.uint8)])
    np.testing.assert_allclose(feature(rgba), feature(rgb), rtol=1e-12, atol=0)
    for image in (grey > 0.5, np.zeros((9, 12)), np.full((8, 8), 255, np.uint8)):
        vector = feature(image)
        assert vector.shape == (feature.dimension,) and np.all(np.isfinite(vector))


def test_uint8_and_float_versions_of_an_image_agree(camera):
    small = camera[::8, ::8]
    for feature in FEATURES:
        np.testing.assert_allclose(
            feature(small), feature(small / 255.0), rtol=1e-6, atol=1e-9, err_msg=feature.name
        )


def test_simple_features_mean_what_they_say(camera):
    image = camera[:40, :100]
    np.testing.assert_array_equal(get_feature("size_meta")(image), [40, 100, 2.5])
    assert get_feature("intensity_hist")(image).sum() == pytest.approx(1.0)
    thumb = get_feature("thumbnail")(np.full((16, 16), 0.25))
    np.testing.assert_allclose(thumb, 0.25, rtol=1e-6)
    bands = get_feature("fft_bands")(camera[::4, ::4])
    assert bands[:8].sum() == pytest.approx(1.0) and bands[8:].sum() == pytest.approx(1.0)


def test_features_carry_different_information():
    # The digits at one size: the thumbnail separates classes, size_meta cannot.
    from sklearn.model_selection import cross_val_score
    from sklearn.neighbors import KNeighborsClassifier

    images, labels, _ = load_digits_images(sides=(16,), n_per_class=20)

    def accuracy(name):
        X = np.array([compute_features(im, [name])[name] for im in images])
        return cross_val_score(KNeighborsClassifier(3), X, labels, cv=4).mean()

    assert accuracy("thumbnail") > 0.7
    assert accuracy("size_meta") < 0.2


# --------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "image, error, words",
    [
        (np.empty((9, 9), dtype=object), TypeError, "dtype object"),
        (np.zeros((9, 9), dtype=complex), TypeError, "dtype complex128"),
        (np.zeros((9, 9), dtype=np.int64), TypeError, "dtype int64"),
        (np.array(["a"] * 81).reshape(9, 9), TypeError, "dtype <U1"),
        (np.zeros(81), ValueError, "1 dimensions"),
        (np.zeros((9, 9, 3, 1)), ValueError, "4 dimensions"),
        (np.zeros((9, 9, 2)), ValueError, "3 (RGB) or 4 (RGBA)"),
        (np.zeros((0, 9)), ValueError, "empty"),
        (np.zeros((5, 9)), ValueError, f"at least {MIN_SIDE}"),
        (np.full((9, 9), np.nan), ValueError, "NaN"),
        (np.full((9, 9), np.inf), ValueError, "infinite"),
        (np.full((9, 9), 2.0), ValueError, "[0, 1]"),
        (np.full((9, 9), -0.5), ValueError, "[0, 1]"),
        ([[1, 2], [3]], TypeError, "cannot be read"),
    ],
)
def test_bad_images_give_one_clear_error(image, error, words):
    with pytest.raises(error, match="item 7") as info:
        validate_image(image, index=7)
    assert words in str(info.value)
    with pytest.raises(error) as info:
        validate_image(image)
    assert "item" not in str(info.value)


def test_good_images_pass_validation():
    for image in (
        np.zeros((8, 8), bool),
        np.zeros((8, 9), np.uint16),
        np.ones((9, 8), np.float32),
        np.ones((9, 9, 3), np.float16),
        np.zeros((8, 8, 4), np.uint8),
    ):
        assert validate_image(image) is image


def test_item_size_is_pixel_count():
    assert item_size(np.zeros((30, 40))) == 1200
    assert item_size(np.zeros((30, 40, 3))) == 1200
    with pytest.raises(ValueError):
        item_size(np.zeros(5))


def test_compute_features_rejects_bad_images_with_item_index():
    image = np.zeros((16, 16))
    image[3, 3] = np.nan
    with pytest.raises(ValueError, match=r"item 4.*NaN"):
        compute_features(image, ["thumbnail"], index=4)


# --------------------------------------------------------------------------
# Registry and compute_features
# --------------------------------------------------------------------------


class Counting:
    """Wraps a feature function and counts its calls."""

    def __init__(self, function):
        self.function = function
        self.calls = 0

    def __call__(self, image):
        self.calls += 1
        return self.function(image)


@pytest.fixture
def counted():
    """Two counting features registered through the public API."""
    counters = {}
    for base in ("thumbnail", "intensity_hist"):
        feature = get_feature(base)
        counter = Counting(feature.function)
        register_feature(Feature(f"counted_{base}", counter, "test wrapper", feature.dimension))
        counters[f"counted_{base}"] = counter
    yield counters
    for name in counters:
        unregister_feature(name)


def test_compute_features_computes_only_what_is_asked(counted, camera):
    image = camera[::16, ::16]
    out = compute_features(image, ["counted_thumbnail", "size_meta", "counted_thumbnail"])
    assert list(out) == ["counted_thumbnail", "size_meta"]
    assert counted["counted_thumbnail"].calls == 1
    assert counted["counted_intensity_hist"].calls == 0
    np.testing.assert_array_equal(out["counted_thumbnail"], get_feature("thumbnail")(image))

    out = compute_features(image, "counted_intensity_hist")
    assert list(out) == ["counted_intensity_hist"]
    assert counted["counted_intensity_hist"].calls == 1
    assert compute_features(image, []) == {}


def test_unknown_names_and_bad_images_compute_nothing(counted, camera):
    with pytest.raises(ValueError, match="unknown feature 'nope'") as info:
        compute_features(camera, ["counted_thumbnail", "nope"])
    assert isinstance(info.value, KeyError) and isinstance(info.value, UnknownFeatureError)
    assert "thumbnail" in str(info.value)  # the known names are listed
    with pytest.raises(ValueError):
        compute_features(np.zeros((2, 2)), ["counted_thumbnail"])
    assert counted["counted_thumbnail"].calls == 0


def test_get_feature_unknown():
    with pytest.raises(ValueError, match="'no_such_feature'"):
        get_feature("no_such_feature")
    with pytest.raises(KeyError):
        get_feature("no_such_feature")


def test_registered_features_are_not_defaults(counted):
    assert "counted_thumbnail" in REGISTRY
    assert "counted_thumbnail" not in [f.name for f in default_features()]


def test_registering_a_taken_name_needs_replace():
    feature = Feature("size_meta", lambda image: np.zeros(3), "impostor", 3)
    with pytest.raises(ValueError, match="already registered"):
        register_feature(feature)
    original = get_feature("size_meta")
    try:
        assert register_feature(feature, replace=True) is get_feature("size_meta")
    finally:
        register_feature(original, replace=True)
    assert get_feature("size_meta") is original


def test_feature_definition_is_checked():
    with pytest.raises(ValueError):
        Feature("", np.ravel)
    with pytest.raises(TypeError):
        Feature("x", "not callable")
    with pytest.raises(ValueError):
        Feature("x", np.ravel, "", 0)


def _explode(image):
    raise ZeroDivisionError("boom")


@pytest.mark.parametrize(
    "function, words",
    [
        (_explode, "failed on item 3: ZeroDivisionError: boom"),
        (lambda image: np.zeros((2, 2)), "not a 1-D vector"),
        (lambda image: np.zeros(5), "returned 5 values, not 4"),
        (lambda image: np.full(4, np.nan), "non-finite"),
    ],
)
def test_failing_features_raise_feature_error(function, words):
    register_feature(Feature("fragile", function, "", 4))
    try:
        with pytest.raises(FeatureError) as info:
            compute_features(np.zeros((8, 8)), ["size_meta", "fragile"], index=3)
    finally:
        unregister_feature("fragile")
    error = info.value
    assert isinstance(error, ValueError)
    assert "'fragile'" in str(error) and words in str(error)
    assert error.feature == "fragile" and error.index == 3
    if function is _explode:
        assert isinstance(error.__cause__, ZeroDivisionError)


# --------------------------------------------------------------------------
# Data sets
# --------------------------------------------------------------------------


def test_digits_are_rendered_item_major_at_every_side():
    sides = (16, 24, 32)
    images, labels, image_sides = load_digits_images(sides=sides, n_per_class=3)
    assert len(images) == len(labels) == len(image_sides) == 10 * 3 * len(sides)
    np.testing.assert_array_equal(image_sides, np.tile(sides, 30))
    np.testing.assert_array_equal(labels, np.repeat(labels[:: len(sides)], len(sides)))
    assert np.bincount(labels).tolist() == [3 * len(sides)] * 10
    for image, side in zip(images, image_sides):
        assert image.dtype == np.uint8 and image.shape == (side, side)
        validate_image(image)
    # The same digit at two sides looks alike; different digits less so.
    a16, a32 = images[0], images[2]
    same = np.corrcoef(resize(a32, (16, 16)).ravel(), a16.ravel())[0, 1]
    assert same > 0.8


def test_digits_are_deterministic_and_noisy():
    first, _, _ = load_digits_images(sides=(16,), n_per_class=2, random_state=1)
    again, _, _ = load_digits_images(sides=(16,), n_per_class=2, random_state=1)
    other, _, _ = load_digits_images(sides=(16,), n_per_class=2, random_state=2)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other))
    # Noise: the background is not uniformly black.
    assert len(np.unique(first[0][:2])) > 1


def test_digits_reject_bad_arguments():
    with pytest.raises(ValueError):
        load_digits_images(sides=(4,))
    with pytest.raises(ValueError):
        load_digits_images(n_per_class=0)


def _write_idx(path, array):
    header = bytes([0, 0, 0x08, array.ndim]) + np.array(array.shape, ">u4").tobytes()
    with gzip.open(path, "wb") as handle:
        handle.write(header + array.astype(np.uint8).tobytes())


def test_fashion_mnist_reader_on_idx_files(tmp_path):
    rng = np.random.default_rng(0)
    pictures = rng.integers(0, 256, size=(20, 28, 28), dtype=np.uint8)
    labels = np.arange(20) % 10
    _write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", pictures)
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", labels)
    assert fashion_mnist_available(tmp_path)
    np.testing.assert_array_equal(read_idx(tmp_path / "t10k-images-idx3-ubyte.gz"), pictures)
    got_pictures, got_labels = load_fashion_mnist(tmp_path)
    np.testing.assert_array_equal(got_pictures, pictures)
    np.testing.assert_array_equal(got_labels, labels)
    images, image_labels, sides = load_fashion_mnist_images(
        sides=(28, 56), n_per_class=1, directory=tmp_path
    )
    assert len(images) == 20 and sorted(set(image_labels)) == list(range(10))
    assert [im.shape[0] for im in images[:2]] == [28, 56] and list(sides[:2]) == [28, 56]


def test_fashion_mnist_missing_or_malformed(tmp_path):
    assert not fashion_mnist_available(tmp_path)
    with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist"):
        load_fashion_mnist(tmp_path)
    with pytest.raises(ValueError):
        load_fashion_mnist(tmp_path, subset="valid")
    bad = tmp_path / "bad.gz"
    with gzip.open(bad, "wb") as handle:
        handle.write(bytes([0, 0, 0x08, 1]) + np.array([5], ">u4").tobytes() + b"abc")
    with pytest.raises(ValueError, match="holds 3 values"):
        read_idx(bad)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, bool, np.float16, np.float32, np.float64])
@pytest.mark.parametrize("channels", [None, 3, 4])
def test_the_grey_step_converts_every_accepted_image_as_scikit_image_does(dtype, channels):
    from skimage.util import img_as_float64

    from polydom.featurizers import STEPS, as_gray_float

    rng = np.random.default_rng(3)
    shape = (9, 12) if channels is None else (9, 12, channels)
    if dtype is bool:
        image = rng.random(shape) > 0.5
    elif np.dtype(dtype).kind == "u":
        image = rng.integers(0, np.iinfo(dtype).max, shape, endpoint=True).astype(dtype)
    else:
        image = rng.random(shape).astype(dtype)
    expected = img_as_float64(rgb2gray(image[..., :3]) if channels else image)
    grey = as_gray_float(image)
    assert grey.dtype == np.float64 and np.array_equal(grey, expected)
    assert np.array_equal(STEPS["grey"].prepare(image), expected)
    if dtype is np.float64 and channels is None:
        assert grey is image  # no copy
