"""The profile stage on the CPU platforms: a verified candidate's kernels, launches and CPU
counters come back with its result; without profiling there is none; the profile is advice
and never changes a status or a time."""

from __future__ import annotations

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.evaluator.profile import Profile
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.conftest import EXAMPLES


@pytest.fixture(scope="module")
def profiling() -> Evaluator:
    return Evaluator(EvalConfig(baselines=(), profile=True, check_unseen=False))


def test_cpu_cpp_profile_names_the_extension_call_and_counts_cpu_work(profiling):
    result = profiling.evaluate(
        EXAMPLES / "cpu_cpp" / "gemm_bias_relu.py",
        resolve_problem("level2/01_gemm_bias_relu", size_set="ci"),
        get_platform("cpu-cpp"),
    )
    assert result.status is Status.OK, result.message
    profile = result.profile
    assert isinstance(profile, Profile) and profile.device == "cpu"
    assert profile.launches_per_call == 1 and profile.calls == 5
    (kernel,) = profile.kernels
    assert kernel.name.endswith(".gemm_bias_relu") and kernel.calls == 5 and kernel.where == "host"
    assert kernel.total_us > 0 and profile.wall_us_per_call > 0
    (span,) = profile.timeline  # the last call: its one launch, inside the call
    assert span.lane == "host" and span.start_us >= 0 and span.dur_us > 0
    assert profile.counter("cpu_ms") is not None and profile.counter("busy_threads") > 0
    assert Profile.from_json(profile.to_json()) == profile  # stored and read back whole


def test_cpu_triton_profile_and_no_profile_without_asking(profiling):
    problem = resolve_problem("level1/04_softmax", size_set="ci")
    path, platform = EXAMPLES / "triton" / "softmax.py", get_platform("cpu-triton")
    result = profiling.evaluate(path, problem, platform)
    assert result.status is Status.OK, result.message
    assert result.profile is not None and result.profile.tool == "launch-timer"
    assert {k.name for k in result.profile.kernels} == {"_softmax_row_single"}
    plain = Evaluator(EvalConfig(baselines=(), check_unseen=False)).evaluate(
        path, problem, platform
    )
    assert plain.status is Status.OK and plain.profile is None
    assert plain.timing is not None and plain.timing.runs == result.timing.runs
