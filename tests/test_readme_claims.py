"""What the README promises about installation is what pyproject.toml and the tests deliver."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_extra_the_readme_names_exists_and_every_engine_it_names_is_tested():
    readme = (ROOT / "README.md").read_text()
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    named = set(re.findall(r"polydom\[(\w+)\]", readme)) | set(re.findall(r'pip install "\.\[(\w+)\]"', readme))
    assert named and named <= set(extras), named - set(extras)
    # Any other extra is a parallel engine: claimed only with a test of its own. ``bench`` holds
    # the peers that benchmarks/ compares against and ``docs`` what builds the docs (a test of
    # its own, tests/test_docs.py), not engines.
    assert "polydom[docs]" in "".join(extras["test"])
    for engine in set(extras) - {"images", "test", "bench", "docs"}:
        assert f'backend="{engine}"' in tests, engine
    assert "ray" not in extras and not re.search(r"\bRay\b", readme)
