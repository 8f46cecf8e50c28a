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


def test_a_source_checkout_runs_without_installing(tmp_path):
    """PYTHONPATH=<clone> (the GPU machines' way) finds the packages that install inside
    kforge_search from the checkout's top level; -S leaves out site-packages, where an
    editable install would otherwise answer for them."""
    code = (
        "import kforge_search.store as s, kforge_search.actors as a, kforge_search.prompts as p;"
        "print(s.__file__, a.__file__, p.__file__)"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", code],
        env={"PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == [
        str(ROOT / "store" / "__init__.py"),
        str(ROOT / "actors" / "__init__.py"),
        str(ROOT / "prompts" / "__init__.py"),
    ]
