"""Peers (docs/evaluator.md, "Peers"): the speedup of record is over the fastest PyTorch
setting that passes the policy on the problem; the fp32-only figure stays beside it."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from kforge_search.cli.app import app
from kforge_search.evaluator import EvalConfig, EvalResult, Evaluator, Status
from kforge_search.evaluator.peers import (
    SAME,
    admissible,
    check_kind,
    fastest_fp32,
    kinds_for,
    peer_of_record,
    precision,
    split_kind,
)
from kforge_search.evaluator.report import format_report
from kforge_search.evaluator.result import Baseline, PeerCheck, TimingStats
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.conftest import EXAMPLES


def timed(kind: str, ms: float, *passes: str, fails: tuple[str, ...] = ()) -> Baseline:
    checks = (*(PeerCheck(p, True) for p in passes), *(PeerCheck(p, False, 0.1) for p in fails))
    return Baseline(kind, True, TimingStats("cuda_events", 50, ms, ms, ms), checks=checks)


BASELINES = (
    timed("eager", 3.0),  # the reference itself
    timed("compile", 2.0, "strict", "loose"),
    timed("eager-tf32", 0.5, "loose", fails=("strict",)),
    timed("compile-tf32", 0.4, fails=("strict", "loose")),  # fastest, fails loose too
)


def test_kinds_are_modes_at_each_precision():
    assert kinds_for(("eager", "compile"), "cuda", True) == (
        "eager", "compile", "eager-tf32", "compile-tf32",
    )  # fmt: skip
    assert kinds_for(("eager",), "cpu", True) == ("eager", "eager-bf16")
    assert kinds_for(("eager", "compile"), "cuda", False) == ("eager", "compile")
    assert split_kind("compile-tf32") == ("compile", "tf32")
    assert split_kind("eager") == ("eager", "fp32")
    with pytest.raises(ValueError, match="unknown baseline kind"):
        split_kind("eager-fp8")


def test_the_fastest_admissible_kind_is_the_peer_and_the_fp32_figure_stays():
    assert peer_of_record(BASELINES, "strict").kind == "compile"  # tf32 fails strict
    assert peer_of_record(BASELINES, "loose").kind == "eager-tf32"  # compile-tf32 fails loose
    assert fastest_fp32(BASELINES).kind == "compile"
    assert not admissible(BASELINES[3], "loose") and admissible(BASELINES[0], "strict")


def test_unchecked_or_unchanged_reduced_kinds_are_never_peers():
    unchecked = Baseline("eager-tf32", True, TimingStats("cuda_events", 50, 0.1, 0.1, 0.1))
    same = Baseline("compile-tf32", False, note=SAME, error=f"tf32 {SAME}")
    old_compile = Baseline("compile", True, TimingStats("cuda_events", 50, 1, 1, 1))  # cached
    found = (BASELINES[0], unchecked, same, old_compile)
    assert peer_of_record(found, "loose").kind == "compile"  # fp32 and unchecked: as before
    untimed = Baseline("eager", False, error="exited with code 1")
    assert peer_of_record((untimed,), "strict") is None and fastest_fp32((untimed,)) is None


def _result(policy: str) -> EvalResult:
    return EvalResult(
        Status.OK, "verified and timed", "done", "p", "problem", "cuda-triton", policy, "h",
        timing=TimingStats("cuda_events", 50, 0.25, 0.25, 0.25), baselines=BASELINES,
    )  # fmt: skip


def test_the_result_reports_its_peer_and_both_speedups():
    strict, loose = _result("strict"), _result("loose")
    assert strict.peer().kind == "compile" and strict.speedup_of_record == pytest.approx(8.0)
    assert loose.peer().kind == "eager-tf32" and loose.speedup_of_record == pytest.approx(2.0)
    assert strict.speedup_fp32 == loose.speedup_fp32 == pytest.approx(8.0)
    data = loose.to_dict()
    assert (data["peer"], data["speedup"], data["speedup_fp32"]) == ("eager-tf32", 2.0, 8.0)
    report = format_report(loose)
    assert "peer:      2.00x over eager-tf32 (the fastest PyTorch setting that passes loose)" in (
        report
    )
    assert "fp32 only (the faster of eager and compile): 8.00x" in report
    assert "fails loose: " in report  # compile-tf32's line says why it is no peer


def test_a_kind_is_checked_under_each_policy_and_one_that_changes_nothing_is_no_peer():
    ref = torch.randn(4, 16)
    reference = {"outputs": [[ref]], "buffers": [{}], "exact": None, "trial_ids": [0],
                 "wide": [], "plain": [0]}  # fmt: skip
    assert check_kind(lambda: ([[ref.clone()]], [{}]), reference, reduced=True) == ((), SAME)
    off = ref + 1e-3  # a reduced-precision sized error: over strict, within loose
    checks, note = check_kind(lambda: ([[off]], [{}]), reference, reduced=True)
    assert note == "" and {c.policy: c.passed for c in checks} == {"strict": False, "loose": True}
    assert checks[0].mismatch.startswith("trial 0 output 0: values")
    assert checks[0].max_abs_err == pytest.approx(1e-3, rel=1e-3)


def test_a_kinds_comparisons_come_after_the_word_that_its_trials_ran(monkeypatch):
    """`ran()` between the kind's trials (device work) and the comparisons (on the CPU when
    the reference is too large for the device: the baseline child leaves the lock there)."""
    from kforge_search.evaluator import verify

    ref = torch.randn(4, 16)
    reference = {"outputs": [[ref]], "buffers": [{}], "exact": None, "trial_ids": [0],
                 "wide": [], "plain": [0]}  # fmt: skip
    order: list[str] = []
    compare = verify.compare_outputs

    def compared(*args, **kwargs):
        order.append("compare")
        return compare(*args, **kwargs)

    monkeypatch.setattr(verify, "compare_outputs", compared)

    def trials():
        order.append("trials")
        return [[ref + 1e-3]], [{}]

    checks, _ = check_kind(trials, reference, reduced=False, ran=lambda: order.append("ran"))
    assert order == ["trials", "ran", "compare", "compare"] and len(checks) == 2


def test_the_precision_settings_are_restored():
    before = (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32)
    with precision("tf32"):
        assert torch.get_float32_matmul_precision() == "high"
        assert torch.backends.cuda.matmul.allow_tf32
    with precision("bf16"):
        assert torch.get_float32_matmul_precision() == "medium"
    assert (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32) == before


def test_kforge_eval_shows_the_peer_on_cpu_cpp():
    args = ["eval", str(EXAMPLES / "cpu_cpp/gemm_bias_relu.py"), "--problem",
            "level2/01_gemm_bias_relu", "--platform", "cpu-cpp", "--sizes", "ci"]  # fmt: skip
    shown = CliRunner().invoke(app, args)
    assert shown.exit_code == 0, shown.output
    assert "peer:      " in shown.output and "fp32 only (the faster of eager and compile)" in (
        shown.output
    )
    assert "eager-bf16:" in shown.output and "compile-bf16:" in shown.output
    data = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    assert data["peer"] in {b["kind"] for b in data["baselines"]}
    assert data["speedup"] and data["speedup_fp32"]
    kinds = {b["kind"]: b for b in data["baselines"]}
    assert set(kinds) == {"eager", "compile", "eager-bf16", "compile-bf16"}
    assert [c["policy"] for c in kinds["compile"]["checks"]] == ["strict", "loose"]


@pytest.mark.gpu
def test_on_cuda_a_gemm_gets_a_tf32_peer_under_loose_and_not_under_strict():
    problem = resolve_problem("level2/01_gemm_bias_relu")  # 1024 x 8192 x 8192
    platform = get_platform("cuda-triton")
    evaluator = Evaluator(EvalConfig(spare_child=False))
    try:
        found = evaluator.baselines(problem, platform, evaluator.reference(problem, platform))
    finally:
        evaluator.close()
    kinds = {b.kind: b for b in found}
    assert set(kinds) == {"eager", "compile", "eager-tf32", "compile-tf32"}
    tf32 = kinds["eager-tf32"]
    assert tf32.ok and tf32.check("loose").passed, tf32
    assert not tf32.check("strict").passed  # TF32's 10-bit mantissa: over 1e-4 at K = 8192
    assert peer_of_record(found, "loose").kind.endswith("-tf32")
    assert not peer_of_record(found, "strict").kind.endswith("-tf32")
    assert fastest_fp32(found).kind in ("eager", "compile")
