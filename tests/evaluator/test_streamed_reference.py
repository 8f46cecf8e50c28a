"""A reference whose trials' outputs and float64 copies do not all fit streams: its oracle
recomputes one trial at a time and compares the candidate's there (trial_check.py,
oracle_compare.py), so a problem the machine could not hold all trials of at once evaluates
(footprint.streamed)."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.evaluator import footprint as fp_mod
from kforge_search.evaluator.footprint import Footprint
from kforge_search.evaluator.oracle_compare import comparison_of
from kforge_search.evaluator.policy import get_policy
from kforge_search.evaluator.verify import compare_outputs
from kforge_search.platforms import get_platform
from kforge_search.problem import ProblemError, resolve_problem
from tests.conftest import EXAMPLES

CPU = get_platform("cpu-triton")
CHAIN = EXAMPLES / "triton/elementwise_chain.py"
STALE = Path(__file__).parents[1] / "adversarial/candidates/30a_precomputed_timing_inputs.py"
# 256 x 16384 float32 in and out: 16 MiB each; the reference's 9 trials and their float64
# copies 432 MiB. On a machine of 5440 MiB (4896 MiB for an evaluation, less a process's
# 4 GiB: 800 MiB) keeping them needs about 1.1 GiB at once, streaming them about 450 MiB.
SIZES = {"batch_size": 256, "dim": 16384}
MACHINE_MB = "5440"


def _config(keep_mb: int) -> EvalConfig:
    return EvalConfig(baselines=(), memory_limit_mb=3000, reference_keep_mb=keep_mb)


def _off_and_stale_are_caught(evaluator: Evaluator, problem, platform) -> None:
    """Against a streamed reference: a kernel off by 1e-4 fails at its first trial, and
    stale timed outputs are caught (the timed runs too are checked in the oracle)."""
    off = evaluator.evaluate_source(
        CHAIN.read_text().replace("y * 2.0 - 0.1", "y * 2.0 - 0.1001"), problem, platform
    )
    assert off.status is Status.INCORRECT and off.stage == "verify", off.message
    assert off.correctness.trials_run == 9 and off.correctness.trials_passed < 9
    assert off.artifacts.mismatch is not None and off.artifacts.mismatch.trial == 0
    stale = evaluator.evaluate(STALE, problem, platform)
    assert stale.status is Status.REJECTED, stale.message
    assert stale.artifacts.reasons == ("timing:stale-output",), stale.message


def test_the_model_refuses_keeping_all_trials_and_admits_one_at_a_time(monkeypatch):
    monkeypatch.setenv(fp_mod.MACHINE_ENV, MACHINE_MB)
    problem = resolve_problem("level1/10_elementwise_chain").resized(overrides=SIZES)
    fp = Footprint(16 * 2**20, 16 * 2**20, 16 * 2**20, 0)
    assert fp_mod.streamed(fp, 9, 300 * 2**20) and not fp_mod.streamed(fp, 9, 0)
    assert "needs about 1.11 GiB of host memory" in fp_mod.shortfall(problem, fp, "cpu", 9)
    assert fp_mod.shortfall(problem, fp, "cpu", 9, stream=True) == ""
    assert fp_mod.need_bytes(fp, "reference", "cpu", 9, True) < fp_mod.need_bytes(
        fp, "reference", "cpu", 9
    )


def test_the_oracles_verdict_reaches_the_parent_as_it_was_made():
    """The oracle answers with a comparison through JSON: the parent reads back the same
    figures and the same first mismatch (its indices as tuples)."""
    import torch

    expected = torch.zeros(4, 3)
    actual = expected.clone()
    actual[2, 1] = 1.0
    found = compare_outputs([[expected]], [[actual]], get_policy("strict"), trial_ids=[5])
    assert found.mismatch is not None and found.mismatch.indices == ((2, 1),)
    back = comparison_of(json.loads(json.dumps(asdict(found))))
    assert back == found and not back.ok


def test_a_problem_whose_trials_do_not_fit_at_once_evaluates_one_trial_at_a_time(monkeypatch):
    monkeypatch.setenv(fp_mod.MACHINE_ENV, MACHINE_MB)  # the children see it too
    problem = resolve_problem("level1/10_elementwise_chain").resized(overrides=SIZES)
    kept = Evaluator(_config(0))  # every trial kept: refused on this machine, as before
    try:
        with pytest.raises(ProblemError, match=r"needs about 1\.11 GiB of host memory at once"):
            kept.reference(problem, CPU, oracle=False)
    finally:
        kept.close()
    evaluator = Evaluator(_config(300))  # past 300 MiB of trials: streamed
    try:
        ref = evaluator.reference(problem, CPU)
        assert ref.streamed is not None and ref.outputs == [] and ref.held_bytes == 0
        assert ref.streamed.float64 and ref.numerics.trial_ids == tuple(range(9))
        parts = dict(ref.spent)  # a streamed reference's own parts beside the common ones
        assert {"float32 trials", "float64", "reads of the trials", "determinism"} <= set(parts)
        result = evaluator.evaluate(CHAIN, problem, CPU)
        assert result.status is Status.OK, result.message
        assert result.correctness.trials_run == result.correctness.trials_passed == 9
        assert result.generalizes == "yes"  # the unseen sizes (kept: they are small)
        _off_and_stale_are_caught(evaluator, problem, CPU)
    finally:
        evaluator.close()


@pytest.mark.gpu
def test_on_a_gpu_the_streamed_trials_stay_on_the_device_and_say_the_same():
    """A streamed reference's child reads its trials on the device (reference_child
    .stays_on_device): the sizes, the float32 error and the verdicts are those of a reference
    that keeps every trial, and a candidate verifies against it."""
    gpu = get_platform("cuda-triton")
    problem = resolve_problem("level1/10_elementwise_chain").resized(overrides=SIZES)
    refs = {}
    for keep in (0, 300):  # each its own reference, not the one the other stored
        evaluator = Evaluator(replace(_config(keep), share_references=False))
        try:
            refs[keep] = evaluator.reference(problem, gpu)
            if keep:
                result = evaluator.evaluate(CHAIN, problem, gpu)
                assert result.status is Status.OK, result.message
                assert result.correctness.trials_passed == 9
        finally:
            evaluator.close()
    kept, streamed = refs[0], refs[300]
    assert kept.streamed is None and streamed.streamed is not None
    assert streamed.numerics.trial_ids == kept.numerics.trial_ids
    assert streamed.streamed.float64
    for a, b in zip(streamed.scales, kept.scales, strict=True):
        assert a == pytest.approx(b, rel=1e-6)


@pytest.mark.gpu
def test_on_a_gpu_the_oracle_reads_the_candidates_outputs_where_they_are():
    """Against a streamed reference on a GPU the candidate's outputs reach the oracle as
    CUDA IPC handles (shared_outputs.py): a right kernel verifies, one off by 1e-4 fails at
    its first trial, and stale timed outputs are caught, as through files."""
    gpu = get_platform("cuda-triton")
    problem = resolve_problem("level1/10_elementwise_chain").resized(overrides=SIZES)
    evaluator = Evaluator(replace(_config(300), share_references=False))
    try:
        assert evaluator.reference(problem, gpu).streamed is not None
        result = evaluator.evaluate(CHAIN, problem, gpu)
        assert result.status is Status.OK, result.message
        assert result.correctness.trials_passed == 9
        _off_and_stale_are_caught(evaluator, problem, gpu)
    finally:
        evaluator.close()
