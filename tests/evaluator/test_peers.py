"""Peers (docs/evaluator.md, "Peers"): the speedup of record is over the fastest PyTorch
setting that passes the policy on the problem; the fp32-only figure stays beside it."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest
import torch
from typer.testing import CliRunner

from kforge_search.cli.app import app
from kforge_search.evaluator import EvalConfig, EvalResult, Evaluator, Status
from kforge_search.evaluator.peers import (
    CHECKED,
    SAME,
    STREAMED,
    admissible,
    check_kind,
    fastest_fp32,
    kinds_for,
    peer_of_record,
    precision,
    refusal,
    refusals,
    runnable,
    split_kind,
)
from kforge_search.evaluator.report import format_report
from kforge_search.evaluator.result import Baseline, PeerCheck, TimingStats
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.conftest import EXAMPLES, ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "numerics"


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
        "eager", "compile", "eager-tf32", "compile-tf32", "eager-autocast", "compile-autocast",
    )  # fmt: skip
    assert kinds_for(("eager",), "cpu", True) == ("eager", "eager-bf16")
    assert kinds_for(("eager", "compile"), "cuda", False) == ("eager", "compile")
    assert split_kind("compile-tf32") == ("compile", "tf32")
    assert split_kind("eager") == ("eager", "fp32")
    assert split_kind("compile-autocast") == ("compile", "autocast")
    with pytest.raises(ValueError, match="unknown baseline kind"):
        split_kind("eager-fp8")


def test_an_autocast_kind_runs_the_forward_in_bfloat16_and_gives_float32_back():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU())
    x = torch.randn(8, 64)
    with precision("autocast"):
        out = runnable(model, "autocast", "cpu")(x)
    exact = model(x)
    assert out.dtype == torch.float32 and out.shape == exact.shape
    assert not torch.equal(out, exact)  # the matmul ran in bfloat16
    torch.testing.assert_close(out, exact, rtol=2e-2, atol=2e-2)
    assert runnable(model, "tf32", "cpu") is model and runnable(model, "fp32", "cpu") is model
    own = torch.nn.Linear(64, 32).to(torch.bfloat16)  # a problem in bfloat16: its dtype stays
    assert runnable(own, "autocast", "cpu")(x.to(torch.bfloat16)).dtype == torch.bfloat16
    pair = runnable(pair_module(), "autocast", "cpu")(x)
    assert isinstance(pair, tuple) and [t.dtype for t in pair] == [torch.float32, torch.int64]


def pair_module() -> torch.nn.Module:
    class Pair(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(64, 32)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            y = self.linear(x)
            return y, y.argmax(dim=1)

    return Pair()


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


def at_unseen(b: Baseline, *passes: str, fails: tuple[str, ...] = ()) -> Baseline:
    """`b` checked at the problem's unseen sizes too: passing `passes`, failing `fails`."""
    checks = (*(PeerCheck(p, True, unseen=True) for p in passes),
              *(PeerCheck(p, False, 0.2, mismatch="trial 0 output 0: values", unseen=True)
                for p in fails))  # fmt: skip
    return replace(b, checks=(*b.checks, *checks), unseen=CHECKED)


def test_a_kind_that_fails_a_policy_at_the_unseen_sizes_is_no_peer_there():
    """TF32 passing strict at the published K and failing it at the unseen K (H100: 1.1e-4
    against strict's 1e-4): as a candidate that does so, no peer under strict."""
    tf32 = at_unseen(timed("eager-tf32", 0.5, "strict", "loose"), "loose", fails=("strict",))
    compiled = at_unseen(timed("compile", 2.0, "strict", "loose"), "strict", "loose")
    found = (BASELINES[0], compiled, tf32)
    assert tf32.check("strict").passed and not tf32.check("strict", unseen=True).passed
    assert not admissible(tf32, "strict") and admissible(tf32, "loose")
    assert refusal(tf32, "strict") == "fails strict at the unseen sizes: trial 0 output 0: values"
    assert refusal(tf32, "loose") == "" and admissible(compiled, "strict")
    assert peer_of_record(found, "strict").kind == "compile"
    assert peer_of_record(found, "loose").kind == "eager-tf32"
    assert refusals(tf32) == refusal(tf32, "strict")
    # the same kind without the unseen sizes (a problem that has none): the peer, as before
    published = replace(tf32, checks=tf32.checks[:2], unseen="")
    assert peer_of_record((*found[:2], published), "strict").kind == "eager-tf32"


def test_a_kind_not_checked_at_the_unseen_sizes_does_not_pass_there():
    """Where the evaluation has unseen sizes (`unseen` "checked"), a kind without a check
    there (under a policy) is no peer, fp32 or reduced; only a streamed unseen reference's
    (not held by the parent) leaves an fp32 kind admissible, as at the problem's sizes."""
    missing = replace(timed("eager-tf32", 0.5, "strict", "loose"), unseen=CHECKED)
    assert not admissible(missing, "strict") and not admissible(missing, "loose")
    assert refusal(missing, "loose") == "not checked under loose at the unseen sizes: no peer"
    only_loose = at_unseen(timed("compile", 0.5, "strict", "loose"), "loose")
    assert not admissible(only_loose, "strict") and admissible(only_loose, "loose")
    fp32 = replace(timed("compile", 0.5, "strict", "loose"), unseen=STREAMED)
    reduced = replace(timed("eager-tf32", 0.4, "strict", "loose"), unseen=STREAMED)
    assert admissible(fp32, "strict") and not admissible(reduced, "strict")
    assert "(their reference streams)" in refusal(reduced, "strict")
    assert peer_of_record((BASELINES[0], fp32, reduced, missing), "loose").kind == "compile"
    assert admissible(replace(BASELINES[0], unseen=CHECKED), "strict")  # the reference


def test_the_report_says_a_kind_fails_at_the_unseen_sizes():
    tf32 = at_unseen(timed("eager-tf32", 0.5, "strict", "loose"), "loose", fails=("strict",))
    result = replace(_result("strict"), baselines=(BASELINES[0], tf32))
    report = format_report(result)
    assert (
        "passes strict (max abs err 0, max rel err 0), but fails strict at the unseen sizes: "
        in (report)
    )
    assert "peer:      12.00x over eager" in report
    loose = format_report(replace(result, policy="loose"))
    assert "passes loose (max abs err 0, max rel err 0), and at the unseen sizes (" in loose
    assert "peer:      2.00x over eager-tf32" in loose


def test_a_check_at_the_unseen_sizes_says_so_and_is_never_same():
    ref = torch.randn(4, 16)
    reference = {"outputs": [[ref]], "buffers": [{}], "exact": None, "trial_ids": [0],
                 "wide": [], "plain": [0]}  # fmt: skip
    checks, note = check_kind(lambda: ([[ref.clone()]], [{}]), reference, True, unseen=True)
    assert note == "" and [(c.policy, c.passed, c.unseen) for c in checks] == [
        ("strict", True, True), ("loose", True, True),
    ]  # fmt: skip


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
    # each policy checked at the problem's sizes, then at its unseen sizes (PeerCheck.unseen)
    checks = [(c["policy"], c["unseen"]) for c in kinds["compile"]["checks"]]
    assert checks == [("strict", False), ("loose", False), ("strict", True), ("loose", True)]


def test_on_the_cpu_a_bf16_kind_that_fails_strict_at_the_unseen_sizes_is_not_its_peer():
    """The baseline child checks the kinds at the problem's unseen sizes too, on their
    reference's trials: eager-bf16 passes strict at K = 16 and fails it at the unseen
    K = 16384 (the fixture's docstring says how), so strict's peer is fp32 eager, loose's
    may be eager-bf16; read again (from the cache, or from memory where a loaded host made
    the timing noisy: baselines.py), the checks and their state come back as measured."""
    problem = resolve_problem(str(FIXTURES / "bf16_long_k.py"))
    platform = get_platform("cpu-cpp")
    # a baseline cache key of this test's own: not from `random`, which the harness seeds
    # in this process (evaluator/inputs.py), so that the key repeats and the cache, kept
    # across runs, answered
    seed = random.SystemRandom().randrange(10**6, 10**7)
    config = EvalConfig(seed=seed, baselines=("eager",), spare_child=False, timed_runs=5)
    evaluator = Evaluator(config)
    try:
        ref = evaluator.reference(problem, platform)
        found = evaluator.baselines(problem, platform, ref)
        again = evaluator.baselines(problem, platform, ref)  # not measured again
    finally:
        evaluator.close()
    eager, bf16 = found
    assert (eager.kind, bf16.kind) == ("eager", "eager-bf16") and bf16.ok, bf16
    assert bf16.unseen == CHECKED and not bf16.note and not bf16.cached
    strict, strict_unseen = bf16.check("strict"), bf16.check("strict", unseen=True)
    assert strict.passed and strict.max_abs_err > 0  # differs, within strict: checked, timed
    assert not strict_unseen.passed and strict_unseen.mismatch.endswith("values"), bf16
    assert bf16.check("loose").passed and bf16.check("loose", unseen=True).passed
    assert not admissible(bf16, "strict") and admissible(bf16, "loose")
    assert refusal(bf16, "strict").startswith("fails strict at the unseen sizes: trial ")
    assert peer_of_record(found, "strict").kind == "eager"
    assert [(b.kind, b.checks, b.unseen) for b in again] == [
        (b.kind, b.checks, b.unseen) for b in found
    ]


@pytest.mark.gpu
def test_on_cuda_a_gemm_gets_a_reduced_peer_under_loose_and_not_under_strict():
    problem = resolve_problem("level2/01_gemm_bias_relu")  # 1024 x 8192 x 8192
    platform = get_platform("cuda-triton")
    evaluator = Evaluator(EvalConfig(spare_child=False))
    try:
        found = evaluator.baselines(problem, platform, evaluator.reference(problem, platform))
    finally:
        evaluator.close()
    kinds = {b.kind: b for b in found}
    reduced = ("eager-tf32", "compile-tf32", "eager-autocast", "compile-autocast")
    assert set(kinds) == {"eager", "compile", *reduced}
    tf32 = kinds["eager-tf32"]
    assert tf32.ok and tf32.check("loose").passed, tf32
    assert not tf32.check("strict").passed  # TF32's 10-bit mantissa: over 1e-4 at K = 8192
    # bfloat16's 7 bits: checked under every policy (on the H200 it failed loose too, on the
    # second distribution's trials), never unchecked
    autocast = kinds["eager-autocast"]
    assert {c.policy for c in autocast.checks} == {"strict", "loose"}, autocast
    assert not autocast.check("strict").passed
    assert peer_of_record(found, "loose").kind in reduced
    assert peer_of_record(found, "strict").kind in ("eager", "compile")
    assert fastest_fp32(found).kind in ("eager", "compile")
