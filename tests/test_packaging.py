"""A clean install holds every package of the checkout (pyproject.toml lists them by hand)."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"polydom": "polydom", "lattice": "polydom.lattice", "index": "polydom.index", "greedy": "polydom.greedy",
           "featurizers": "polydom.featurizers"}


def test_every_package_folder_is_installed():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = set()
    for folder, package in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            if folder == "polydom" and parts and parts[0] in FOLDERS:
                continue
            found.add(".".join([package, *parts]))
    assert found and found <= listed, sorted(found - listed)
