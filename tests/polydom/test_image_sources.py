"""Images in every form a service receives: PNG and JPEG paths, bytes, PIL images and arrays, mixed;
decoding sized from the header and timed inside the budget."""

import io
import math

import numpy as np
import pytest
from PIL import Image

import polydom
from polydom.featurizers.datasets import load_digits_images
from polydom.featurizers.sources import as_array, decode_image, header_shape

NAMES = ["intensity_hist", "thumbnail", "edge_density"]


def _rgb(image) -> np.ndarray:
    """A digit rendering (float grey in [0, 1]) as an 8-bit RGB array, what a file holds."""
    grey = np.round(np.asarray(image) * 255).astype(np.uint8)
    return np.repeat(grey[:, :, None], 3, axis=2)


def _encoded(array, fmt) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format=fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return buffer.getvalue()


@pytest.fixture(scope="module")
def files(tmp_path_factory, fast_params):
    """Arrays, their PNG and JPEG files and bytes, and a classifier fitted on the PNG files."""
    root = tmp_path_factory.mktemp("sources")
    images, labels, _ = load_digits_images(sides=(24, 48), n_per_class=4, random_state=1)
    arrays = [_rgb(im) for im in images]
    paths = {}
    for fmt, ext in (("PNG", "png"), ("JPEG", "jpg")):
        paths[fmt] = []
        for i, array in enumerate(arrays):
            path = root / f"{i}.{ext}"
            path.write_bytes(_encoded(array, fmt))
            paths[fmt].append(str(path))
    clf = polydom.CostSensitiveClassifier(features=NAMES, **fast_params).fit(paths["PNG"], labels)
    return arrays, paths, labels, clf


def test_every_form_gives_the_labels_of_the_array_it_decodes_to(files):
    arrays, paths, _, clf = files
    for fmt in ("PNG", "JPEG"):
        decoded = [np.asarray(Image.open(p).convert("RGB")) for p in paths[fmt]]
        expected = clf.predict(decoded).tolist()
        assert clf.predict(paths[fmt]).tolist() == expected, fmt
        assert clf.predict([open(p, "rb").read() for p in paths[fmt]]).tolist() == expected, fmt
        assert clf.predict([Image.open(p) for p in paths[fmt]]).tolist() == expected, fmt
    # PNG is lossless: its files decode to the arrays themselves.
    assert all(np.array_equal(decode_image(p), a) for p, a in zip(paths["PNG"], arrays))
    mixed = [paths["PNG"][0], open(paths["PNG"][1], "rb").read(), Image.open(paths["PNG"][2]), arrays[3]]
    assert clf.predict(mixed).tolist() == clf.predict(arrays[:4]).tolist()


def test_one_image_without_a_list_says_to_wrap_it(files):
    arrays, paths, _, clf = files
    for single in (paths["PNG"][0], open(paths["PNG"][0], "rb").read(), Image.open(paths["PNG"][0]), arrays[0]):
        with pytest.raises(ValueError, match=r"wrap a single image in a list: \[image\]"):
            clf.predict(single)
    assert clf.predict([paths["PNG"][0]]).shape == (1,)


def test_bad_files_fail_naming_the_item(files, tmp_path):
    _, paths, _, clf = files
    with pytest.raises(FileNotFoundError, match=r"image \(item 1\): no file"):
        clf.predict([paths["PNG"][0], str(tmp_path / "missing.png")])
    with pytest.raises(ValueError, match=r"image \(item 0\): 9 bytes is not an image"):
        clf.predict([b"not a png"])
    tiny = _encoded(np.zeros((4, 4, 3), dtype=np.uint8), "PNG")
    with pytest.raises(ValueError, match="item 0"):
        clf.predict([tiny])


def test_the_size_comes_from_the_header_and_grey_files_stay_grey(tmp_path):
    grey = (np.arange(30 * 40) % 256).astype(np.uint8).reshape(30, 40)
    path = tmp_path / "grey.png"
    Image.fromarray(grey).save(path)
    assert header_shape(str(path)) == (30, 40)
    assert np.array_equal(as_array(str(path)), grey)
    palette = Image.fromarray(grey).convert("P")
    assert as_array(palette).shape == (30, 40, 3)


def test_decoding_is_timed_and_inside_the_budget(files):
    arrays, paths, _, clf = files
    fit = clf._state().decode_fit
    assert fit is not None and fit.name == "decode" and len(fit.sizes) == len(paths["PNG"])
    assert fit.guard >= 1.0 and fit.curve(48 * 48) > 0
    # No time to decode: nothing is decoded or computed, and the answer is on time.
    (starved,) = clf.explain([paths["PNG"][0]], budget=fit.curve(48 * 48) * 1e-3)
    assert starved.features == () and starved.measured_cost == 0.0 and ("decode", ()) not in starved.steps
    # Time enough: decoded first, its time counted in the answer's measured cost.
    (fed,) = clf.explain([paths["PNG"][0]], budget=1.0)
    assert fed.steps[0] == ("decode", ()) and fed.features and fed.measured_cost > 0
    # An array needs no decoding.
    (plain,) = clf.explain([arrays[0]], budget=1.0)
    assert ("decode", ()) not in plain.steps


def test_the_decode_curve_is_saved_and_loaded(files, tmp_path):
    _, paths, _, clf = files
    clf.save(tmp_path / "index")
    loaded = polydom.CostSensitiveClassifier.load(tmp_path / "index")
    before, after = clf._state().decode_fit, loaded._state().decode_fit
    assert after.curve == before.curve and after.guard == before.guard
    assert loaded.predict(paths["JPEG"]).tolist() == clf.predict(paths["JPEG"]).tolist()


def test_a_batch_decodes_its_files_inside_its_total_budget(files):
    arrays, paths, _, clf = files
    # An unlimited total: every item gets its best set whatever the machine's load (a finite one
    # gives each item its planned time, which a loaded machine can overrun), so files and arrays
    # answer alike.
    expected = clf.predict(arrays[:6], total_budget=math.inf).tolist()
    assert clf.predict(paths["PNG"][:6], total_budget=math.inf).tolist() == expected
    explained = clf.explain(paths["PNG"][:6], total_budget=math.inf)
    assert all(e.steps[0] == ("decode", ()) for e in explained)
    assert explained.summary.spent == pytest.approx(sum(e.measured_cost for e in explained), rel=0.01)
