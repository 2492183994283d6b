"""Rooms a predict and a fit pass: the library modules and packages whose code they run.

A maintainer who changes one idea should visit few modules. This fits a small classifier (digits
at 16, 24 and 32 px, three built-in features) and predicts six images, with a profile hook that
records every library function called, and counts the modules (files) and packages (folders)
those functions live in, and the package-to-package call edges (a function in one package calling
one in another). It measures the checkout the imported ``polydom`` comes from: to compare two
revisions, run it once with each revision installed.

Run from the project root::

    python -P benchmarks/rooms.py [--list] [--out benchmarks/results/rooms.md]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import polydom

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # sibling helpers, under python -P too
from revision import LIBRARY, source_of  # noqa: E402

FEATURES = ("intensity_hist", "thumbnail", "edge_density")


def _images():
    from skimage.transform import resize
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = [resize(digits.images[i] / 16.0, (side, side)) for i, side in zip(range(90), [16, 24, 32] * 30)]
    return images, digits.target[:90] % 2


def _traced(run, root: Path):
    """``(modules, edges)``: the library files whose functions ``run()`` called, relative to
    ``root``, and the (caller package, callee package) pairs between different packages."""
    modules, edges = set(), set()

    def library_file(code) -> str | None:
        path = code.co_filename
        if not path.startswith(str(root)):
            return None
        rel = os.path.relpath(path, root)
        return rel if rel.split(os.sep)[0] in LIBRARY else None

    def hook(frame, event, arg):
        if event != "call":
            return
        callee = library_file(frame.f_code)
        if callee is None:
            return
        modules.add(callee)
        caller = None if frame.f_back is None else library_file(frame.f_back.f_code)
        if caller is not None and os.path.dirname(caller) != os.path.dirname(callee):
            edges.add((os.path.dirname(caller), os.path.dirname(callee)))

    sys.setprofile(hook)
    try:
        run()
    finally:
        sys.setprofile(None)
    return modules, edges


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print every module as well")
    parser.add_argument("--out", default=None, help="write a markdown report here")
    args = parser.parse_args(argv)

    root = Path(polydom.__file__).resolve().parents[1]
    images, y = _images()
    clf = polydom.CostSensitiveClassifier(features=list(FEATURES), progress=False)
    fit = _traced(lambda: clf.fit(images, y), root)
    clf.predict(images[:3], budget=0.005)  # the first predict prepares the walk: count a later one
    predict = _traced(lambda: clf.predict(images[:6], budget=0.005), root)

    source = source_of(polydom)
    lines = ["# Rooms a predict and a fit pass", "",
             f"`python -P benchmarks/rooms.py` on {'an unknown checkout' if source is None else source[0]}"
             f"{'' if not source or not source[1] else ' (with local changes)'}: digits at 16, 24 and 32 px, "
             f"features {', '.join(FEATURES)}, 90 images fitted, 6 predicted.", "",
             "| call | modules | packages | package-to-package call edges |", "|---|---:|---:|---:|"]
    for name, (modules, edges) in (("predict", predict), ("fit", fit)):
        packages = {os.path.dirname(m) for m in modules}
        lines.append(f"| {name} | {len(modules)} | {len(packages)} | {len(edges)} |")
        print(f"{name}: {len(modules)} modules in {len(packages)} packages, {len(edges)} package-to-package edges")
        if args.list:
            print("  " + "\n  ".join(sorted(modules)))
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
        print(f"report written to {args.out}")


if __name__ == "__main__":
    main()
