"""Custom features travel with the index: a fresh process finds one only in a module it trusts by
name, refuses one whose source changed, and ``polydom recost`` re-times it."""

import contextlib
import importlib
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import polydom
from polydom.featurizers import REGISTRY, unregister_feature
from polydom.featurizers.datasets import load_digits_images
from polydom.featurizers.provenance import FeatureSource, FeatureSourceError, load_features, source_of

MODULE = "polydom_travel_features"
SOURCE = textwrap.dedent('''
    """Custom features of the travel test."""
    import numpy as np
    import polydom


    @polydom.feature(dimension=2)
    def brightness(image):
        "Mean and spread of the grey levels."
        image = np.asarray(image, dtype=float)
        return [image.mean(), image.std()]
''')


@contextlib.contextmanager
def imported(root, module: str, source: str):
    """``source`` written as ``root/code/<module>.py`` and imported from there; on exit, forgotten
    (off the path, out of ``sys.modules``): the caller unregisters what it registered."""
    (root / "code").mkdir()
    (root / "code" / f"{module}.py").write_text(source)
    sys.path.insert(0, str(root / "code"))
    try:
        yield importlib.import_module(module)
    finally:
        sys.path.remove(str(root / "code"))
        sys.modules.pop(module, None)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, fast_params):
    """A classifier fitted with a custom feature and saved; the feature's module on a path of its own."""
    root = tmp_path_factory.mktemp("travel")
    try:
        with imported(root, MODULE, SOURCE):
            images, labels, _ = load_digits_images(sides=(16, 24), n_per_class=5, random_state=0)
            clf = polydom.CostSensitiveClassifier(features=["thumbnail", "brightness"], **fast_params)
            clf.fit(images, labels)
            clf.save(root / "index")
            served = [im for im in images if im.shape[0] == 16][:12]  # one size: they stack into one array
            expected = clf.predict(served).tolist()
    finally:
        unregister_feature("brightness")
    return root, served, expected


def _fresh(root, code: str, subprocess_env) -> subprocess.CompletedProcess:
    env = {**subprocess_env, "PYTHONPATH": str(root / "code")}
    return subprocess.run([sys.executable, "-P", "-c", textwrap.dedent(code)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=180)


def test_a_fresh_process_loads_the_feature_only_from_a_trusted_module(saved, subprocess_env):
    root, images, expected = saved
    np.save(root / "images.npy", np.stack(images))
    untrusted = _fresh(root, f"""
        import polydom
        try:
            polydom.CostSensitiveClassifier.load("index")
        except polydom.FeatureSourceError as error:
            print("refused:", error)
        import sys
        print("imported:", {MODULE!r} in sys.modules)
    """, subprocess_env)
    assert untrusted.returncode == 0, untrusted.stderr
    assert f"feature 'brightness' is defined in module '{MODULE}'" in untrusted.stdout
    assert f"feature_modules=['{MODULE}']" in untrusted.stdout and "imported: False" in untrusted.stdout

    trusted = _fresh(root, f"""
        import json
        import numpy as np
        import polydom
        clf = polydom.CostSensitiveClassifier.load("index", feature_modules=[{MODULE!r}])
        print(json.dumps(clf.predict(list(np.load("images.npy"))).tolist()))
    """, subprocess_env)
    assert trusted.returncode == 0, trusted.stderr
    assert json.loads(trusted.stdout.strip().splitlines()[-1]) == expected


def test_a_changed_source_is_refused(saved, subprocess_env, tmp_path):
    root, _, _ = saved
    changed = tmp_path / "code"
    changed.mkdir()
    (changed / f"{MODULE}.py").write_text(SOURCE.replace("Mean and spread", "Mean and deviation"))
    proc = subprocess.run([sys.executable, "-P", "-c", textwrap.dedent(f"""
        import polydom
        try:
            polydom.CostSensitiveClassifier.load({str(root / 'index')!r}, feature_modules=[{MODULE!r}])
        except polydom.FeatureSourceError as error:
            print("refused:", error)
    """)], cwd=tmp_path, env={**subprocess_env, "PYTHONPATH": str(changed)}, capture_output=True, text=True,
        timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert f"the source of module '{MODULE}', which defines feature 'brightness', changed" in proc.stdout


def test_recost_and_inspect_work_with_the_custom_feature(saved, subprocess_env, tmp_path):
    root, _, _ = saved
    env = {**subprocess_env, "PYTHONPATH": str(root / "code")}
    out = tmp_path / "recosted"
    proc = subprocess.run([sys.executable, "-P", "-m", "polydom.cli", "recost", str(root / "index"), "--repeats", "1",
                           "--feature-modules", MODULE, "--out", str(out)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "nothing was trained" in proc.stderr and "brightness" in proc.stdout
    refused = subprocess.run([sys.executable, "-P", "-m", "polydom.cli", "recost", str(root / "index")],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 1 and "--feature-modules" in refused.stderr
    shown = subprocess.run([sys.executable, "-P", "-m", "polydom.cli", "inspect", str(out), "--json"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    modules = {f["name"]: f.get("module") for f in json.loads(shown.stdout)["features"]}
    assert modules == {"thumbnail": "polydom.featurizers.image_features", "brightness": MODULE}


def test_sources_of_built_in_features_need_no_trust_and_a_stranger_is_refused():
    thumbnail = source_of(REGISTRY["thumbnail"])
    assert thumbnail.builtin and load_features([thumbnail]) == [REGISTRY["thumbnail"]]
    stranger = FeatureSource("nowhere_feature", "no_such_module_here", "f", "0" * 64)
    with pytest.raises(FeatureSourceError, match="no_such_module_here"):
        load_features([stranger])
    with pytest.raises(FeatureSourceError, match="no module 'no_such_module_here' on the import path"):
        load_features([stranger], trusted_modules=["no_such_module_here"])
    with pytest.raises(ValueError, match="four strings"):
        FeatureSource.from_json({"name": "x"})


def test_the_decorator_registers_and_a_reload_replaces_its_own_feature():
    @polydom.feature(name="travel_probe", dimension=1)
    def probe(image):
        return [float(np.asarray(image).max())]

    try:
        assert REGISTRY["travel_probe"] is probe and probe(np.ones((8, 8))).tolist() == [1.0]

        @polydom.feature(name="travel_probe", dimension=1)
        def probe(image):  # noqa: F811 - the same module and name: a reload
            return [0.0]

        assert REGISTRY["travel_probe"] is probe

        def other(image):
            return [1.0]

        other.__qualname__ = "elsewhere"
        with pytest.raises(ValueError, match="already registered"):
            polydom.feature(name="travel_probe")(other)
    finally:
        unregister_feature("travel_probe")


STEP_MODULE = "polydom_travel_steps"
STEP_SOURCE = textwrap.dedent('''
    """A custom step and a custom feature that needs it."""
    import numpy as np
    import polydom


    @polydom.step()
    def saturation(image):
        "Each pixel's spread between its largest and smallest channel."
        image = np.asarray(image, dtype=float)
        return image.max(axis=2) - image.min(axis=2)


    @polydom.feature(dimension=2, requires=("saturation",))
    def saturation_stats(image, saturation):
        "Mean and spread of the saturation."
        return [saturation.mean(), saturation.std()]
''')


def test_a_custom_step_is_shared_and_travels_from_a_trusted_module(tmp_path, fast_params, subprocess_env):
    from polydom.featurizers import unregister_step

    try:
        with imported(tmp_path, STEP_MODULE, STEP_SOURCE):
            images, labels, _ = load_digits_images(sides=(16, 24), n_per_class=5, random_state=0)
            rng = np.random.default_rng(0)
            colour = [np.stack([im, im, (im * rng.random()).astype(im.dtype)], axis=2) for im in images]
            clf = polydom.CostSensitiveClassifier(features=["thumbnail", "saturation_stats"], **fast_params)
            clf.fit(colour, labels)
            assert clf.index_.features == ("grey", "saturation", "thumbnail", "saturation_stats")
            assert clf.index_.params["requires"] == {"thumbnail": ["grey"], "saturation_stats": ["saturation"]}
            clf.save(tmp_path / "index")
            served = [im for im in colour if im.shape[0] == 16][:12]
            expected = clf.predict(served, budget=None).tolist()
            with pytest.raises(ValueError, match="a feature named 'thumbnail' is registered"):
                polydom.step(name="thumbnail")(lambda image: image)
    finally:
        unregister_feature("saturation_stats")
        unregister_step("saturation")
    np.save(tmp_path / "images.npy", np.stack(served))
    code = f"""
        import json
        import numpy as np
        import polydom
        try:
            polydom.CostSensitiveClassifier.load("index")
        except polydom.FeatureSourceError as error:
            print("refused:", error)
        clf = polydom.CostSensitiveClassifier.load("index", feature_modules=[{STEP_MODULE!r}])
        print(json.dumps(clf.predict(list(np.load("images.npy")), budget=None).tolist()))
    """
    proc = _fresh(tmp_path, code, subprocess_env)
    assert proc.returncode == 0, proc.stderr
    assert f"step 'saturation' is defined in module '{STEP_MODULE}'" in proc.stdout
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == expected


# ------------------------------------------------------------------ nothing untrusted or changed runs


def test_a_changed_module_runs_none_of_its_code_before_it_is_refused(saved, subprocess_env, tmp_path):
    root, _, _ = saved
    changed = tmp_path / "code"
    changed.mkdir()
    marker = tmp_path / "ran"
    side_effect = f"open({str(marker)!r}, 'w').write('imported')\n"
    (changed / f"{MODULE}.py").write_text(side_effect + SOURCE)
    proc = subprocess.run([sys.executable, "-P", "-c", textwrap.dedent(f"""
        import polydom
        try:
            polydom.CostSensitiveClassifier.load({str(root / 'index')!r}, feature_modules={MODULE!r})
        except polydom.FeatureSourceError as error:
            print("refused:", error)
    """)], cwd=tmp_path, env={**subprocess_env, "PYTHONPATH": str(changed)}, capture_output=True, text=True,
        timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert "changed since the index was saved" in proc.stdout and "nothing of it was run" in proc.stdout
    assert not marker.exists()


def test_a_tampered_bytecode_cache_is_never_executed(saved, subprocess_env, tmp_path):
    """A ``__pycache__`` file made from other code, stamped with the source's mtime and size, is what
    a plain import would run; the verified load compiles the source it checked instead."""
    import importlib.util
    import os
    import shutil
    from importlib._bootstrap_external import _code_to_timestamp_pyc

    root, images, expected = saved
    code_dir = tmp_path / "code"
    shutil.copytree(root / "code", code_dir, ignore=shutil.ignore_patterns("__pycache__"))
    source = code_dir / f"{MODULE}.py"
    marker = tmp_path / "tampered"
    evil = SOURCE.replace("return [image.mean(), image.std()]",
                          f"open({str(marker)!r}, 'w').write('ran'); return [42.0, 42.0]")
    info = os.stat(source)
    pyc = importlib.util.cache_from_source(str(source))
    os.makedirs(os.path.dirname(pyc), exist_ok=True)
    with open(pyc, "wb") as file:
        file.write(_code_to_timestamp_pyc(compile(evil, str(source), "exec"), int(info.st_mtime), info.st_size))
    np.save(tmp_path / "images.npy", np.stack(images))
    proc = subprocess.run([sys.executable, "-P", "-c", textwrap.dedent(f"""
        import json
        import numpy as np
        import polydom
        clf = polydom.CostSensitiveClassifier.load({str(root / 'index')!r}, feature_modules={MODULE!r})
        print(json.dumps(clf.predict(list(np.load("images.npy")), budget=None).tolist()))
    """)], cwd=tmp_path, env={**subprocess_env, "PYTHONPATH": str(code_dir)}, capture_output=True, text=True,
        timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == expected
    assert not marker.exists()


def test_crafted_records_cannot_hand_a_name_to_code_the_process_registered(saved):
    """A record claiming polydom's module for a feature polydom does not define, or a record with
    no sources at all, is refused while a custom ``brightness`` is registered in this process."""
    import dataclasses

    from polydom.classifier.classifier_state import ClassifierMetadata

    root, _, _ = saved

    @polydom.feature(name="brightness", dimension=2)
    def brightness(image):
        return [0.0, 0.0]

    try:
        claims_builtin = FeatureSource("brightness", "polydom.featurizers.image_features", "brightness", "0" * 64)
        with pytest.raises(FeatureSourceError, match="polydom defines no such feature there"):
            load_features([claims_builtin])
        renamed = dataclasses.replace(source_of(REGISTRY["thumbnail"]), name="brightness")
        with pytest.raises(FeatureSourceError, match="polydom defines no such feature there"):
            load_features([renamed])
        meta = ClassifierMetadata.from_index(polydom.load(root / "index"), "the test index")
        unsourced = dataclasses.replace(meta, feature_sources=None)
        with pytest.raises(FeatureSourceError, match="records no source for feature 'brightness'"):
            unsourced.features(["thumbnail", "brightness"])
        assert unsourced.features(["thumbnail"]) == [REGISTRY["thumbnail"]]
    finally:
        unregister_feature("brightness")


def test_a_feature_in_main_warns_at_save_and_is_refused_by_name(tmp_path, fast_params):
    def brightness_main(image):
        image = np.asarray(image, dtype=float)
        return [image.mean(), image.std()]

    brightness_main.__module__ = "__main__"
    polydom.feature(name="brightness_main", dimension=2)(brightness_main)
    try:
        images, labels, _ = load_digits_images(sides=(16,), n_per_class=4, random_state=0)
        clf = polydom.CostSensitiveClassifier(features=["thumbnail", "brightness_main"], **fast_params)
        clf.fit(images, labels)
        with pytest.warns(polydom.PolydomWarning, match="defined in __main__.*myfeatures.py"):
            clf.save(tmp_path / "index")
        main_source = source_of(REGISTRY["brightness_main"])
    finally:
        unregister_feature("brightness_main")
    with pytest.raises(FeatureSourceError, match="defined in __main__.*move it into a module"):
        load_features([main_source], trusted_modules=["__main__"])


def test_a_single_module_name_counts_as_one_module(saved, subprocess_env):
    from polydom.featurizers.provenance import normalize_modules

    assert normalize_modules("myfeatures") == ("myfeatures",)
    assert normalize_modules(["a", "b.c"]) == ("a", "b.c")
    with pytest.raises(FeatureSourceError, match="module names"):
        normalize_modules([3])
    root, images, expected = saved
    np.save(root / "single.npy", np.stack(images))
    proc = _fresh(root, f"""
        import json
        import numpy as np
        import polydom
        clf = polydom.CostSensitiveClassifier.load("index", feature_modules={MODULE!r})
        print(json.dumps(clf.predict(list(np.load("single.npy"))).tolist()))
    """, subprocess_env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == expected
