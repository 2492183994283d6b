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
    assert fit.guard_ratio >= 1.0 and fit.curve(48 * 48) > 0
    # No time to decode: nothing is decoded or computed, and the answer is on time.
    (starved,) = clf.explain([paths["PNG"][0]], budget=fit.curve(48 * 48) * 1e-3)
    assert starved.features == () and starved.measured_cost == 0.0 and ("decode", ()) not in starved.steps
    # Time enough: decoded first, its time counted in the answer's measured cost.
    (fed,) = clf.explain([paths["PNG"][0]], budget=1.0)
    assert fed.steps[0] == ("decode", ()) and fed.features and fed.measured_cost > 0
    # An array needs no decoding.
    (plain,) = clf.explain([arrays[0]], budget=1.0)
    assert ("decode", ()) not in plain.steps


def test_a_decode_that_buys_no_feature_is_not_done(files):
    """The decode fits, but the time it leaves buys no feature: nothing is decoded (it would only
    make the answer late)."""
    arrays, paths, _, clf = files
    state = clf._state()
    fit = state.decode_fit
    size = 48 * 48
    cheapest = min(curve(size) for name, curve in clf.cost_curves_.items())
    budget = fit.guard_ratio * fit.curve(size) + 0.5 * cheapest  # the decode fits, no feature after it
    assert not state.index.lookup(size, budget - fit.guard_ratio * fit.curve(size)).features
    big = [p for p, a in zip(paths["PNG"], arrays) if a.shape[0] * a.shape[1] == size][0]
    (e,) = clf.explain([big], budget=budget)
    assert ("decode", ()) not in e.steps and e.computed == () and e.measured_cost == 0.0


def test_a_decode_with_a_deadline_stops_at_the_next_block_it_reads(files, tmp_path):
    from polydom.featurizers.sources import DecodeDeadline

    rng = np.random.default_rng(0)
    noise = rng.integers(0, 256, (600, 800, 3), dtype=np.uint8)  # incompressible: many blocks to read
    data = _encoded(noise, "PNG")
    path = tmp_path / "noise.png"
    path.write_bytes(data)
    for item in (data, str(path)):
        reads = [0]

        def clock():
            reads[0] += 1
            return float(reads[0])

        with pytest.raises(DecodeDeadline):
            decode_image(item, deadline=3.0, clock=clock)
        assert reads[0] == 4  # the read after the deadline stops it, not the end of the file
        # A deadline never reached changes nothing.
        assert np.array_equal(decode_image(item, deadline=math.inf), decode_image(item))


def test_a_decode_that_overruns_is_given_up_and_the_answer_is_on_time(files, tmp_path):
    """A decode predicted to fit but slower than predicted stops where no feature could follow
    it: the answer computes nothing and is not late."""
    arrays, paths, _, clf = files
    big = [p for p, a in zip(paths["PNG"], arrays) if a.shape[0] == 48][0]
    planner = clf.server().planner
    budget = 1.0
    now = [0.0]

    def clock():  # every read of the file costs a second: the decode overruns any budget
        now[0] += 1.0
        return now[0]

    planner.clock = clock
    served = planner.serve(big, 0, budget)
    assert served.computed == () and not served.plan.names
    assert served.measured < budget  # on the real clock: the decode stopped at once
    assert ("decode", ()) not in served.steps


def test_a_classifier_fitted_on_arrays_learns_what_decoding_costs(files, fast_params):
    arrays, paths, labels, _ = files
    clf = polydom.CostSensitiveClassifier(features=NAMES, **fast_params).fit(arrays, labels)
    fit = clf._state().decode_fit
    assert fit is not None and fit.curve(48 * 48) > 0 and len(fit.sizes) >= 12
    # A file whose decode cannot fit its budget is not decoded: the answer computes nothing.
    (e,) = clf.explain([paths["JPEG"][0]], budget=fit.curve(48 * 48) * 1e-3)
    assert ("decode", ()) not in e.steps and e.computed == ()
    (fed,) = clf.explain([paths["JPEG"][0]], budget=1.0)
    assert fed.steps[0] == ("decode", ()) and fed.computed


def test_the_decode_curve_is_saved_and_loaded(files, tmp_path):
    _, paths, _, clf = files
    clf.save(tmp_path / "index")
    loaded = polydom.CostSensitiveClassifier.load(tmp_path / "index")
    before, after = clf._state().decode_fit, loaded._state().decode_fit
    assert after.curve == before.curve and after.guard_ratio == before.guard_ratio
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


# ------------------------------------------------------------------ bounded reading, one error root


def _png_claiming(width: int, height: int, idat: bytes = b"") -> bytes:
    """A PNG whose header claims ``width x height`` grey pixels, with ``idat`` as its data."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + (chunk(b"IDAT", idat) if idat else b"") + chunk(b"IEND", b"")


def _solid_png(side: int) -> bytes:
    """A real, valid, all-black grey PNG of ``side x side``: a megabyte that decodes to ``side**2`` bytes."""
    import zlib

    squeeze = zlib.compressobj(9)
    row = bytes(side + 1)  # filter byte 0, then black pixels
    data = b"".join(squeeze.compress(row) for _ in range(side)) + squeeze.flush()
    return _png_claiming(side, side, data)


def _timed(call):
    import time

    start = time.perf_counter()
    try:
        call()
    except Exception as exc:  # the test asserts the kind
        return exc, time.perf_counter() - start
    return None, time.perf_counter() - start


def test_a_fifo_is_refused_at_once_not_waited_on(files, tmp_path):
    import os
    import threading

    *_, clf = files
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(_timed(lambda: clf.predict([str(fifo)], budget=0.001))),
                              daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert outcome, "predict blocked on a FIFO"
    error, seconds = outcome[0]
    assert isinstance(error, polydom.PolydomError) and isinstance(error, ValueError)
    assert "item 0" in str(error) and "not a regular file" in str(error) and seconds < 1.0


def test_a_huge_text_file_named_jpg_is_refused_without_reading_it(files, tmp_path):
    *_, clf = files
    text = tmp_path / "notes.jpg"
    with open(text, "wb") as file:
        line = b"this is a line of text, not an image\n"
        file.write(line * ((120 << 20) // len(line)))
    error, seconds = _timed(lambda: clf.predict([str(text)], budget=0.001))
    assert isinstance(error, polydom.PolydomError) and "item 0" in str(error) and "not an image polydom reads" in str(error)
    assert seconds < 1.0


@pytest.mark.parametrize("bomb", ["header", "solid"])
def test_decompression_bombs_are_polydom_errors_naming_the_item(files, bomb):
    from polydom.featurizers.errors import ImageTooLargeError

    *_, clf = files
    data = _png_claiming(100_000, 100_000) if bomb == "header" else _solid_png(20_000)
    assert len(data) < 2 << 20
    for call in (lambda: clf.predict([files[1]["PNG"][0], data], budget=1.0), lambda: header_shape(data, index=1)):
        with pytest.raises(ImageTooLargeError, match=r"item 1\).*over the pixel limit") as caught:
            call()
        assert isinstance(caught.value, polydom.PolydomError) and isinstance(caught.value, ValueError)


def test_the_pixel_limit_is_settable_and_refuses_before_decoding(files):
    from polydom.featurizers.sources import pixel_limit, set_pixel_limit

    arrays, paths, *_ = files
    height, width = header_shape(paths["PNG"][0])
    previous = set_pixel_limit(height * width - 1)
    try:
        with pytest.raises(polydom.PolydomError, match="over the pixel limit"):
            decode_image(paths["PNG"][0], index=0)
    finally:
        set_pixel_limit(previous)
    assert pixel_limit() == previous == 89_478_485
    with pytest.raises(polydom.PolydomError, match="positive int"):
        set_pixel_limit(0)


def test_every_bad_item_is_a_polydom_error_and_a_batch_can_answer_around_it(files, tmp_path):
    arrays, paths, _, clf = files
    (tmp_path / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    bad = {"missing": (str(tmp_path / "nope.png"), FileNotFoundError),
           "broken": (str(tmp_path / "broken.png"), ValueError),
           "folder": (str(tmp_path), ValueError),
           "complex": (np.ones((24, 24), dtype=complex), TypeError)}
    for name, (item, base) in bad.items():
        with pytest.raises(polydom.PolydomError, match="item 1") as caught:
            clf.predict([arrays[0], item], budget=1.0)
        assert isinstance(caught.value, base), name
    batch = [paths["PNG"][0], bad["missing"][0], arrays[2], bad["broken"][0]]
    answers = clf.explain(batch, budget=None, errors="return")
    assert [type(a).__name__ for a in answers] == ["Explanation", "ImageNotFoundError", "Explanation", "ImageError"]
    assert [a.label for a in answers[::2]] == clf.predict([paths["PNG"][0], arrays[2]], budget=None).tolist()
    assert "item 3" in str(answers[3])
    server_answers = clf.server().explain(batch, budget=None, errors="return")
    assert [type(a).__name__ for a in server_answers] == [type(a).__name__ for a in answers]
    with pytest.raises(polydom.PolydomError, match="item 1"):
        clf.explain(batch, budget=None)
    with pytest.raises(polydom.PolydomError, match='errors must be "raise" or "return"'):
        clf.explain(batch, errors="ignore")
    with pytest.raises(polydom.PolydomError) as caught:
        clf.predict([arrays[0]], budget=1e-3 + 1j)
    assert isinstance(caught.value, TypeError)
