"""The user guide and the API reference build with warnings as errors."""

import subprocess
import sys



def test_the_docs_build_with_warnings_as_errors(repo_root, tmp_path, subprocess_env):
    out = tmp_path / "html"
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "-d", str(tmp_path / "doctrees"),
         str(repo_root / "docs"), str(out)],
        capture_output=True, text=True, timeout=300, env=subprocess_env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    api = (out / "api.html").read_text()
    for name in ("CostSensitiveClassifier", "lookup_many", "PolydomError", "CostSensitiveIndex"):
        assert name in api
    for page in ("install", "classifier", "engine", "serving", "cli", "custom-features", "deploys"):
        assert (out / "guide" / f"{page}.html").is_file()
    assert (out / "decisions" / "start-rule.html").is_file()
