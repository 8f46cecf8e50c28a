"""A problem's baselines are measured beside its first candidate, not after it."""

from __future__ import annotations

import dataclasses
import time

from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.evaluator.devicelock import JOURNAL_ENV, LOCK_DIR_ENV
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from kforge_search.search.throughput import parse_journal
from tests.conftest import EXAMPLES, own_cache


def _holds(journal, mode: str):
    return [h for h in parse_journal(journal.read_text()) if h.label.endswith(f":{mode}")]


def test_the_first_candidates_baselines_are_measured_beside_it(tmp_path, monkeypatch):
    """Measured after the candidate, a problem's first evaluation took their time on top of
    its own (H200, level 1 at published sizes: 15-30 s of a 35-50 s seed). Ahead, the
    baseline child's holds of the device start while the candidate's child still holds it;
    the evaluation ends with the baselines, from the cache for the next one."""
    journal = tmp_path / "journal"
    monkeypatch.setenv(JOURNAL_ENV, str(journal))
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setenv("KFORGE_CACHE_DIR", str(own_cache(tmp_path / "cache")))  # nothing cached
    problem = resolve_problem("level1/10_elementwise_chain", size_set="ci")
    # Triton's interpreter, its timings taken as meaningful: the baselines are measured as on
    # a compiled platform, without a C++ build
    platform = dataclasses.replace(get_platform("cpu-triton"), timing_meaningful=True)
    config = EvalConfig(baselines=("eager",), reduced_precision=False, check_unseen=False,
                        baselines_ahead=True)  # fmt: skip
    evaluator = Evaluator(config)
    try:
        first = evaluator.evaluate(EXAMPLES / "triton/elementwise_chain.py", problem, platform)
        between = time.time()
        second = evaluator.evaluate(EXAMPLES / "triton/elementwise_chain.py", problem, platform)
    finally:
        evaluator.close()
    assert first.status is Status.OK and second.status is Status.OK, first.message
    assert [b.kind for b in first.baselines] == ["eager"] and first.baselines[0].ok
    # measured once: from the cache, or from memory where a loaded host made it noisy
    assert second.baselines[0].timing == first.baselines[0].timing
    candidate, baseline = _holds(journal, "candidate"), _holds(journal, "baseline")
    assert len({h.holder for h in baseline}) == 1  # one baseline child: measured once
    first_candidate_end = max(h.end for h in candidate if h.end <= between)
    # (with baselines_ahead=False: the first baseline hold starts after the candidate's last)
    assert min(h.start for h in baseline) < first_candidate_end, (candidate, baseline)
