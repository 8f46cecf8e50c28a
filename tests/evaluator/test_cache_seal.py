"""The baseline cache's entries are sealed with the evaluators' key (cache_seal.py): an entry
written, edited or renamed into place by anything else is not used."""

from __future__ import annotations

import json
import os
import stat

from kforge_search.evaluator.baselines import BaselineCache
from kforge_search.evaluator.cache_seal import load_key, private_dir
from kforge_search.evaluator.result import Baseline, TimingStats


def _baseline(p50: float) -> Baseline:
    return Baseline("eager", True, TimingStats("perf_counter", 50, p50, p50, p50))


def test_the_key_is_private_and_made_once(tmp_path):
    key = load_key(tmp_path)
    assert len(key) == 32 and load_key(tmp_path) == key
    folder = private_dir(tmp_path)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "key").stat().st_mode) == 0o600
    assert os.listdir(folder) == ["key"]  # no stray temporary


def test_a_sealed_entry_is_used_and_an_edited_one_is_not(tmp_path):
    path = tmp_path / "baselines.json"
    cache = BaselineCache(path)
    cache.put("k", _baseline(2.0))
    found = cache.get("k", "eager")
    assert found is not None and found.timing.p50_ms == 2.0 and cache.take_tampered() == []

    data = json.loads(path.read_text())
    data["k"]["eager"]["timing"]["p50_ms"] = 200.0  # a slower baseline: inflated speedups
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(data))
    os.replace(forged, path)  # renamed over it, as an attacker would
    assert BaselineCache(path).get("k", "eager") is None
    assert cache.get("k", "eager") is None and cache.take_tampered() == ["k eager"]
    assert cache.take_tampered() == []  # said once

    cache.put("k", _baseline(2.0))  # measured again: replaced, sealed
    assert cache.get("k", "eager") is not None and cache.take_tampered() == []


def test_an_entry_sealed_with_another_key_is_not_used(tmp_path):
    path = tmp_path / "baselines.json"
    BaselineCache(path).put("k", _baseline(2.0))
    (private_dir(tmp_path) / "key").write_bytes(b"x" * 32)  # another key: another machine
    assert BaselineCache(path).get("k", "eager") is None
