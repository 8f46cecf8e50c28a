"""Children write their compiled bytecode to kforge's own folder (PYTHONPYCACHEPREFIX), even
where the environment says PYTHONDONTWRITEBYTECODE: with a prefix Python reads bytecode only
from there, so a prefix nobody writes makes every child compile torch again."""

from __future__ import annotations

import subprocess
import sys

from kforge_search.evaluator.sandbox import child_env


def _compiled(prefix, env) -> list[str]:
    code = "import kforge_search.pysource"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
    return [p.name for p in prefix.rglob("pysource*.pyc")]


def test_a_child_writes_bytecode_to_its_prefix_where_the_environment_forbids_it(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = child_env({"PYTHONPYCACHEPREFIX": str(tmp_path)})
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert _compiled(tmp_path, env)


def test_without_a_prefix_of_ours_the_environment_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path))  # the user's, not ours
    env = child_env({})
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert not _compiled(tmp_path, env)
