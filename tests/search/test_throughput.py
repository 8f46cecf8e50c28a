"""The throughput figures (search/throughput.py) on hand-made evaluations, a lock journal
written here and machine ticks; the measurement's settings; and `kforge bench --throughput`
through the CLI: its errors, and one short real search on cpu-cpp."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace

import pytest
import typer
from typer.testing import CliRunner

from kforge_search.cli.bench import bench_cmd
from kforge_search.search.throughput import (
    Best,
    Evaluation,
    Hold,
    Throughput,
    Tick,
    lane_blocked,
    lane_busy,
    lane_waits,
    parse_journal,
    phase_sums,
    steady_start,
    steady_window,
    window,
)
from kforge_search.search.throughput_run import ThroughputConfig, level2_problems

T0 = 1_800_000_000.0  # epoch seconds


def _eval(problem: str, ended: float, duration: float = 2.0, **phases: float) -> Evaluation:
    return Evaluation(problem, T0 + ended, duration, tuple(phases.items()))


# a: first at 10, b: first at 30 (b's first pays for its reference): steady from 30 on
EVALS = (
    _eval("a", 10.0, 10.0, start=4.0, build=5.0, time=1.0),
    _eval("a", 20.0, 3.0, start=1.0, build=1.5, time=0.5),
    _eval("b", 30.0, 12.0, start=4.0, baselines=7.0, time=1.0),
    _eval("a", 40.0, 4.0, start=1.0, build=2.0, time=1.0),
    _eval("b", 50.0, 2.0, start=1.0, verify=0.5, time=0.5),
    _eval("b", 70.0, 3.0, start=1.5, verify=0.5, time=1.0),
)


def test_steady_state_starts_at_the_last_problems_first_evaluation():
    assert steady_start(reversed(EVALS)) == T0 + 30.0  # order of the rows does not matter
    assert steady_start(EVALS[:2]) == T0 + 10.0  # one problem: after its first
    assert steady_start(()) is None
    steady = steady_window(EVALS, (), (), lanes=1)
    assert steady is not None
    assert (steady.start, steady.end, steady.seconds) == (T0 + 30.0, T0 + 70.0, 40.0)
    assert steady.evaluations == 3  # 40, 50, 70: b's first (at 30) is not in it
    assert steady.per_minute == pytest.approx(3 / (40 / 60))
    assert steady.mean_duration_s == pytest.approx((4.0 + 2.0 + 3.0) / 3)
    assert dict(steady.phases) == pytest.approx(
        {"start": 3.5 / 3, "build": 2.0 / 3, "time": 2.5 / 3, "verify": 1.0 / 3}
    )
    assert steady.timed_fraction == pytest.approx(2.5 / 40)
    assert steady.lane_busy is None  # no journal


def test_evaluations_the_evaluator_failed_are_counted_apart_and_in_no_figure():
    """170 "evaluations" in 156 s on the H100 were 161 forked spares that exited before their
    job: a broken evaluator must not read as a fast one."""
    broken = tuple(
        replace(_eval("b", 55.0 + i, 0.2, start=0.2), status="INFRA_ERROR") for i in range(5)
    )
    steady = steady_window(EVALS + broken, (), (), lanes=1)
    clean = steady_window(EVALS, (), (), lanes=1)
    assert steady is not None and clean is not None
    assert (steady.evaluations, steady.infra_errors) == (3, 5)
    assert steady.per_minute == clean.per_minute
    assert steady.mean_duration_s == clean.mean_duration_s and steady.phases == clean.phases
    assert steady.as_dict(gpu=True)["infra_errors"] == 5


def test_no_steady_state_before_an_evaluation_follows_every_problems_first():
    only_firsts = (EVALS[0], EVALS[2])
    assert steady_window(only_firsts, (), (), lanes=1) is None
    assert steady_window((), (), (), lanes=1) is None


def test_phase_sums_add_over_evaluations_largest_first():
    sums = phase_sums(EVALS)
    assert sums == pytest.approx(
        {"start": 12.5, "build": 8.5, "baselines": 7.0, "time": 5.0, "verify": 1.0}
    )
    assert list(sums) == ["start", "build", "baselines", "time", "verify"]


def test_lane_busy_from_a_journal_counts_exclusive_holds_cut_to_the_window(tmp_path):
    journal = tmp_path / "locks.txt"
    lines = [
        f"1:1 exclusive {T0 + 25:.6f} {T0 + 35:.6f}",  # half of it before the window
        f"1:1 shared {T0 + 35:.6f} {T0 + 60:.6f}",  # builds and verification: not timing
        f"2:7 exclusive {T0 + 40:.6f} {T0 + 44:.6f}",
        "2:7 exclusive 17956",  # cut short by a kill
        f"2:7 exclusive {T0 + 65:.6f} {T0 + 80:.6f}",  # half of it after the window
    ]
    journal.write_text("\n".join(lines) + "\n")
    holds = parse_journal(journal.read_text())
    assert [h.mode for h in holds] == ["exclusive", "shared", "exclusive", "exclusive"]
    busy = 5.0 + 4.0 + 5.0  # seconds of timed runs inside [30, 70]
    assert lane_busy(holds, T0 + 30, T0 + 70, lanes=1) == pytest.approx(busy / 40)
    assert lane_busy(holds, T0 + 30, T0 + 70, lanes=2) == pytest.approx(busy / 80)
    assert lane_busy(holds, T0 + 100, T0 + 110, lanes=1) == 0.0  # quiet: held, not then
    assert lane_busy((), T0, T0 + 10, lanes=1) is None  # no journal: unknown, not idle
    steady = steady_window(EVALS, holds, (), lanes=1)
    assert steady is not None and steady.lane_busy == pytest.approx(busy / 40)


def test_the_idle_lane_is_split_into_a_timing_waiting_and_nothing_to_time(tmp_path):
    """A timing asked at 30 and got its lane at 38 (shared holds before it): the lane was
    idle while it waited until 34, when another timing ran. The journal's asked= and dev=
    fields say when a hold was asked for and on which device."""
    journal = tmp_path / "locks.txt"
    lines = [
        f"1:1 shared {T0 + 20:.6f} {T0 + 38:.6f} p:candidate asked={T0 + 20:.6f} dev=cuda0",
        f"3:3 exclusive {T0 + 34:.6f} {T0 + 36:.6f} p:candidate asked={T0 + 33:.6f} dev=cuda0",
        f"2:7 exclusive {T0 + 38:.6f} {T0 + 40:.6f} asked={T0 + 30:.6f} dev=cuda0",
        f"4:4 exclusive {T0 + 45:.6f} {T0 + 46:.6f} p:candidate asked={T0 + 45:.6f} dev=cuda1",
        f"5:5 exclusive {T0 + 50:.6f} {T0 + 52:.6f} p:candidate",  # a journal from before
    ]
    journal.write_text("\n".join(lines) + "\n")
    holds = parse_journal(journal.read_text())
    assert [h.device for h in holds] == ["cuda0", "cuda0", "cuda0", "cuda1", ""]
    assert [h.label for h in holds][:3] == ["p:candidate", "p:candidate", ""]
    assert [h.waited for h in holds] == pytest.approx([0.0, 1.0, 8.0, 0.0, None])
    # cuda0: waiting [30, 38] minus the timing [34, 36] that ran: 6 s of 40 s x 2 lanes
    assert lane_blocked(holds, T0 + 30, T0 + 70, lanes=2) == pytest.approx(6 / 80)
    assert lane_blocked(holds, T0 + 36, T0 + 37, lanes=1) == pytest.approx(1.0)
    assert lane_waits(holds, T0 + 30, T0 + 70) == pytest.approx((0.0, 1.0, 8.0))
    old = parse_journal(lines[-1] + "\n")
    assert lane_blocked(old, T0, T0 + 70, lanes=1) is None
    steady = window(EVALS, holds, (), T0 + 30, T0 + 70, lanes=2)
    # timing.percentile's interpolation, as a candidate's p50: 1 + (8 - 1) x 0.8 at 0.9
    assert steady.as_dict(gpu=True)["timing_lane_wait_s"] == {"p50": 1.0, "p90": 6.6}
    assert window(EVALS, (), (), T0 + 30, T0 + 70, lanes=1).lane_wait(0.5) is None


def test_cpu_and_gpu_utilization_from_ticks():
    ticks = [
        Tick(T0 + 0, 100, 1000, (0.0, 10.0)),
        Tick(T0 + 30, 400, 2000, (50.0, 20.0)),  # steady state starts here
        Tick(T0 + 50, 900, 2500, (100.0, 0.0)),
        Tick(T0 + 70, 1000, 3000, (30.0, 30.0)),
    ]
    steady = window(EVALS, (), ticks, T0 + 30, T0 + 70, lanes=2)
    assert steady.cpu_utilization == pytest.approx((1000 - 400) / (3000 - 2000))
    assert steady.gpu_utilization == pytest.approx((60.0, 50 / 3))
    whole = window(EVALS, (), ticks, T0, T0 + 70, lanes=2)
    assert whole.cpu_utilization == pytest.approx(900 / 2000)
    assert whole.evaluations == 6 and whole.per_lane_minute == pytest.approx(6 / (70 / 60) / 2)
    assert window(EVALS, (), ticks[:1], T0, T0 + 70, lanes=1).cpu_utilization is None
    with pytest.raises(ValueError, match="lanes 0"):
        window(EVALS, (), ticks, T0, T0 + 70, lanes=0)


def _throughput(gpu: bool) -> Throughput:
    holds = (Hold("1:1", "exclusive", T0 + 40, T0 + 44),)
    return Throughput(
        platform="cuda-triton" if gpu else "cpu-cpp",
        gpu=gpu,
        problems=("a", "b"),
        actors=2,
        per_gpu=2,
        cpus=16,
        command="-m kforge_search search a b",
        exit_code=130,
        stopped=True,
        evaluations=len(EVALS),
        verified=5,
        busy_s=sum(e.duration_s for e in EVALS),
        whole=window(EVALS, holds, (), T0, T0 + 80, lanes=1),
        steady=steady_window(EVALS, holds, (), lanes=1),
        best=(Best("a", 2.5, "compile_tf32", 1.5), Best("b", None, None, None)),
    )


def test_throughput_json_keeps_the_scripts_fields_and_names_gpu_minutes_on_gpus_only():
    data = json.loads(json.dumps(_throughput(gpu=True).as_dict()))
    assert (data["wall_s"], data["evaluations"], data["workers"]) == (80.0, 6, 2)
    assert data["evaluations_per_minute"] == pytest.approx(6 / (80 / 60), abs=1e-3)
    assert data["evaluator_busy_fraction"] == pytest.approx(34 / (80 * 2), abs=1e-3)
    assert data["steady"]["evaluations"] == 3
    assert data["steady"]["evaluations_per_gpu_minute"] == pytest.approx(4.5)
    assert data["steady"]["timing_lane_busy_fraction"] == pytest.approx(0.1)
    assert data["best_speedup"] == {"a": 2.5, "b": None}
    assert data["best"][0] == {"problem": "a", "speedup": 2.5, "peer": "compile_tf32",
                               "speedup_fp32": 1.5}  # fmt: skip
    cpu = _throughput(gpu=False).as_dict()
    assert cpu["evaluations_per_gpu_minute"] is None
    assert cpu["steady"]["evaluations_per_gpu_minute"] is None
    assert cpu["steady"]["evaluations_per_minute"] == pytest.approx(4.5)


def test_measurement_settings_are_checked(tmp_path):
    with pytest.raises(ValueError, match="duration 0 s: needs more than 0"):
        ThroughputConfig(tmp_path, duration_s=0)
    with pytest.raises(ValueError, match="unknown platform 'gpu'"):
        ThroughputConfig(tmp_path, platform="gpu")
    with pytest.raises(ValueError, match="unknown numeric policy"):
        ThroughputConfig(tmp_path, policy="lax")
    with pytest.raises(ValueError, match="lineages 0"):
        ThroughputConfig(tmp_path, lineages=0)
    assert level2_problems(["01", "13"]) == ("level2/01_gemm_bias_relu", "level2/13_gemm_softmax")
    with pytest.raises(ValueError, match="'99'"):
        level2_problems(["99"])
    config = ThroughputConfig(tmp_path, platform="cpu-cpp", sizes="ci", workers=2, tag="w2")
    cmd = config.command()
    assert cmd[cmd.index("--sizes") + 1] == "ci" and cmd[cmd.index("--workers") + 1] == "2"
    assert "--per-gpu" not in cmd and config.db == tmp_path / "search-w2.duckdb"
    cmd = ThroughputConfig(tmp_path, per_gpu=12).command()  # bench --throughput --per-gpu 12
    assert cmd[cmd.index("--per-gpu") + 1] == "12" and "--workers" not in cmd


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("bench")(bench_cmd)
    app.command("noop")(lambda: None)  # two commands: `bench` stays a subcommand
    return app


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def test_bench_throughput_bad_input_gets_a_clear_error(tmp_path):
    out = ["--out", str(tmp_path)]
    cases = [
        (["--platform", "tpu", "--throughput"], "unknown platform 'tpu'"),
        (["--platform", "cpu-cpp", "--throughput", "--duration", "0"], "--duration 0: needs"),
        (["--platform", "cpu-cpp", "--duration", "5"], "--duration is an option of --throughput"),
        (["--platform", "cpu-cpp", "--per-gpu", "4"], "--per-gpu is an option of --throughput"),
        (["--platform", "cpu-cpp", "--throughput", "--per-gpu", "0"], "--per-gpu 0: needs"),
        (["--platform", "cpu-cpp", "--throughput", "--jobs", "2"], "--jobs is not an option"),
        (["--platform", "cpu-cpp", "--throughput", "--policy", "lax"], "unknown numeric policy"),
        (["--platform", "cpu-cpp", "--throughput", "--match", "nothing"], "no problems to search"),
        (["--platform", "cpu-cpp", "--throughput", "--format", "csv"], "a table or json"),
        (["--platform", "cpu-cpp"], "give a SUITE"),
    ]
    if not _has_gpu():
        cases.append((["--platform", "cuda-triton", "--throughput"], "--platform cpu-cpp"))
    for args, says in cases:
        result = CliRunner().invoke(_app(), ["bench", *args, *out])
        assert result.exit_code == 2, (args, result.output)
        assert "Error:" in result.output and says in result.output, (args, result.output)
    assert not (tmp_path / "throughput.json").exists()


@pytest.mark.slow  # 35-110 s on 2 CPUs: Ray, the pool, 3 evaluations, the winner again
def test_bench_throughput_on_cpu_cpp_writes_its_figures(tmp_path):
    args = ["bench", "level2/01_gemm_bias_relu", "--throughput", "--platform", "cpu-cpp"]
    args += ["--sizes", "ci", "--lineages", "1", "--budget", "2", "--duration", "4"]
    result = CliRunner().invoke(_app(), [*args, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "steady state" in result.output and "evaluations / minute" in result.output
    data = json.loads((tmp_path / "throughput.json").read_text())
    assert data["platform"] == "cpu-cpp" and data["lanes"] == 1 and data["exit_code"] == 0
    assert data["evaluations"] > 0 and data["verified"] > 0
    steady = data["steady"]
    assert steady is not None and steady["evaluations"] > 0
    assert steady["evaluations_per_minute"] > 0 and steady["evaluations_per_gpu_minute"] is None
    # the evaluators' timed runs reached the journal through the search's Ray workers
    assert 0 < data["timing_lane_busy_fraction"] < 1
    assert 0 < data["cpu_utilization"] <= 1
    assert data["best"][0]["problem"] == "level2/01_gemm_bias_relu"
    assert data["best"][0]["speedup"] > 0


def test_the_steps_that_reused_another_lineages_results_are_counted_from_the_output():
    from kforge_search.search.throughput_run import StepCount

    counted = StepCount()
    rate = "  (5 evaluated, 9.0/min)"
    for line in [
        "gen 0 level2/09_gemm_sum@cuda-triton#0 (functional): INCORRECT" + rate,
        "gen 0 level2/09_gemm_sum@cuda-triton#1 (functional): INCORRECT (known)" + rate,
        "gen 1 level2/03@cuda-triton#1 (optimization): OK (known); best 7.77x" + rate,
        "gen 1 a@cpu-cpp#0 (optimization): OK, INCORRECT (known); best 1.10x" + rate,
        "gen 2 a@cpu-cpp#1 (optimization): OK (known), INCORRECT (known)" + rate,
        "problem\tplatform\talive",  # the search's closing table: not a step
    ]:
        counted.line(line)
    assert (counted.steps, counted.reused) == (5, 3)
    data = dataclasses.replace(_throughput(gpu=False), steps=5, reused_steps=3).as_dict()
    assert (data["lineage_steps"], data["lineage_steps_reused"]) == (5, 3)


def test_each_timings_wait_goes_to_what_it_waited_for_last(tmp_path):
    """A timing asked at 30 got its lane at 38: the shared holds that ended in its wait were
    a spare's context (at 33) and a candidate's step (at 38, the last): its 8 s go to the
    candidate's step. One asked at 40 waited behind another timing; one on another device
    is not held up by this device's holds; one that did not wait counts nothing."""
    from kforge_search.search.throughput import holder_kind, lane_waited_for

    journal = tmp_path / "locks.txt"
    lines = [
        f"1:1 shared {T0 + 20:.6f} {T0 + 33:.6f} asked={T0 + 20:.6f} dev=cuda0",
        f"2:2 shared {T0 + 25:.6f} {T0 + 38:.6f} p:candidate asked={T0 + 25:.6f} dev=cuda0",
        f"3:3 exclusive {T0 + 38:.6f} {T0 + 41:.6f} p:candidate asked={T0 + 30:.6f} dev=cuda0",
        f"4:4 exclusive {T0 + 41:.6f} {T0 + 42:.6f} p:candidate asked={T0 + 40:.6f} dev=cuda0",
        f"5:5 shared {T0 + 20:.6f} {T0 + 50:.6f} q:baseline asked={T0 + 20:.6f} dev=cuda1",
        f"6:6 exclusive {T0 + 50:.6f} {T0 + 51:.6f} q:baseline asked={T0 + 45:.6f} dev=cuda1",
        f"7:7 exclusive {T0 + 60:.6f} {T0 + 61:.6f} p:candidate asked={T0 + 60:.6f} dev=cuda0",
    ]
    journal.write_text("\n".join(lines) + "\n")
    holds = parse_journal(journal.read_text())
    assert [holder_kind(h) for h in holds] == [
        "spare", "candidate", "timing", "timing", "baseline", "baseline timing", "timing"
    ]  # fmt: skip
    waited = lane_waited_for(holds, T0 + 30, T0 + 70)
    assert waited == pytest.approx({"candidate": 8.0, "baseline": 5.0, "timing": 1.0})
    assert list(waited) == ["candidate", "baseline", "timing"]  # largest first
    assert lane_waited_for(holds, T0 + 39, T0 + 70) == pytest.approx(
        {"baseline": 5.0, "timing": 1.0}
    )  # the first timing got its lane before the window
    steady = window(EVALS, holds, (), T0 + 30, T0 + 70, lanes=2)
    assert steady.as_dict(gpu=True)["timing_lane_wait_s_by_last_holder"] == {
        "candidate": 8.0, "baseline": 5.0, "timing": 1.0
    }  # fmt: skip
