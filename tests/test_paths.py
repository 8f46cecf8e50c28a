"""Where kforge keeps its caches: always an absolute folder (evaluator children work in
folders of their own, where a relative cache path would name a fresh, empty cache)."""

from __future__ import annotations

from kforge_search.paths import cache_dir


def test_a_relative_cache_dir_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KFORGE_CACHE_DIR", "relative-cache")
    path = cache_dir()
    assert path.is_absolute() and path == tmp_path / "relative-cache" and path.is_dir()
