"""`pip install .` ships the library with actors/ and store/ inside kforge_search, and the
bundled problems as package data; nothing installs top-level `actors` or `store`."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_wheel_contents(tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    top = {p.name for p in target.iterdir() if not p.name.endswith(".dist-info")}
    assert top <= {"kforge_search", "bin"}, top
    package = target / "kforge_search"
    for sub in ("actors", "store", "evaluator", "cli", "problems"):
        assert (package / sub / "__init__.py").is_file(), sub
    assert len(list((package / "problems" / "level2").glob("*.py"))) >= 20
    code = "from kforge_search.problem import find_problems; print(len(find_problems()[0]))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(target)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(out.stdout) >= 35
