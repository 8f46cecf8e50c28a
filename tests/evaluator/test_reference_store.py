"""References computed once per node (reference_store.py): a second evaluator reads the
first one's reference from disk instead of running the reference again, and a stored file
that anything but an evaluator changed is not used."""

from __future__ import annotations

import torch

from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.evaluator import pipeline as pipeline_mod
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.conftest import EXAMPLES

CPU = get_platform("cpu-triton")
CHAIN = EXAMPLES / "triton/elementwise_chain.py"


def _problem(dim: int):  # sizes of this file's own: no other test stores these references
    return resolve_problem("level1/10_elementwise_chain").resized(
        overrides={"batch_size": 3, "dim": dim}
    )


def _runs(monkeypatch) -> list[str]:
    """Counts the reference children this process starts."""
    ran: list[str] = []
    real = pipeline_mod.Evaluator._run_reference

    def counted(self, problem, platform, work, keep):
        ran.append(problem.sizes_key)
        return real(self, problem, platform, work, keep)

    monkeypatch.setattr(pipeline_mod.Evaluator, "_run_reference", counted)
    return ran


def test_a_second_evaluator_reads_the_reference_the_first_computed(tmp_path, monkeypatch):
    monkeypatch.setenv("KFORGE_CACHE_DIR", str(tmp_path))
    ran = _runs(monkeypatch)
    problem = _problem(129)
    config = EvalConfig(baselines=(), check_unseen=False)
    first, second = Evaluator(config), Evaluator(config)
    try:
        ref = first.reference(problem, CPU)
        again = second.reference(problem, CPU)
        assert ran == [problem.sizes_key]  # the second read it
        assert len(again.outputs) == len(ref.outputs) == 9
        for a, b in zip(again.outputs, ref.outputs, strict=True):
            assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
        assert again.numerics.trial_ids == ref.numerics.trial_ids
        assert again.numerics.float32_error == ref.numerics.float32_error
        assert again.footprint == ref.footprint and again.per_call_ms == ref.per_call_ms
        # the second evaluator judges candidates with it (its oracle starts when asked)
        result = second.evaluate(CHAIN, problem, CPU)
        assert result.status is Status.OK, result.message
        wrong = CHAIN.read_text().replace("y * 2.0 - 0.1", "y * 2.0 - 0.2")
        assert second.evaluate_source(wrong, problem, CPU).status is Status.INCORRECT
    finally:
        first.close()
        second.close()


def test_a_stored_reference_changed_on_disk_is_computed_again(tmp_path, monkeypatch):
    monkeypatch.setenv("KFORGE_CACHE_DIR", str(tmp_path))
    ran = _runs(monkeypatch)
    problem = _problem(131)
    config = EvalConfig(baselines=(), check_unseen=False)
    first = Evaluator(config)
    try:
        first.reference(problem, CPU, oracle=False)
    finally:
        first.close()
    (stored,) = (tmp_path / "references").glob("*.pt")
    data = bytearray(stored.read_bytes())
    data[-20] ^= 0xFF  # one byte of the outputs changed: the seal no longer matches
    stored.write_bytes(bytes(data))
    second = Evaluator(config)
    try:
        second.reference(problem, CPU, oracle=False)
    finally:
        second.close()
    assert ran == [problem.sizes_key] * 2
