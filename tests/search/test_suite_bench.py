"""kforge bench: rows, summary (geomean, fast_p), roofline, outputs, and the command."""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import json
import math
import shutil

import pytest
import typer
from typer.testing import CliRunner

from kforge_search.agents.base import Draft, Parent
from kforge_search.agents.builtin import TritonGenome
from kforge_search.agents.builtin.ir import Work
from kforge_search.cli.bench import bench_cmd
from kforge_search.evaluator.result import Baseline, EvalResult, Status, TimingStats
from kforge_search.hardware import Peaks
from kforge_search.problem import resolve_problem
from kforge_search.search.suite_bench import (
    BenchRow,
    bench_row,
    best_parent,
    load_rows,
    roofline_fraction,
    summarize,
    write_outputs,
)
from tests.conftest import PROBLEMS, own_cache

PROBLEM = resolve_problem("level2/01_gemm_bias_relu", size_set="ci")
PEAKS = Peaks("test", 10.0, 100.0, 200.0, 1000.0, "datasheet")


def timing(ms: float) -> TimingStats:
    return TimingStats("cuda_events", 50, ms, ms, ms)


def result(status: Status, ms: float | None = None, generalizes: str = "yes") -> EvalResult:
    baselines = (Baseline("eager", True, timing(3.0)), Baseline("compile", True, timing(2.0)))
    return EvalResult(
        status,
        "why",
        "done",
        PROBLEM.id,
        PROBLEM.name,
        "cuda-triton",
        "strict",
        "h",
        timing=timing(ms) if ms else None,
        baselines=baselines,
        generalizes=generalizes,
    )


def parent(status: Status, ms: float | None = None, generalizes: str = "yes") -> Parent:
    draft = Draft(f"# {status} {ms}", "cuda-triton", "builtin", "note", TritonGenome(), "tf32x3")
    return Parent(draft, result(status, ms, generalizes))


def test_roofline_is_the_bound_time_over_the_measured_time():
    # 1 TFLOP at 100/3 TFLOP/s (tf32x3) is 30 ms; 1 GB at 1000 GB/s is 1 ms: compute bound.
    assert roofline_fraction(1e12, 1e9, 60.0, PEAKS, "tf32x3") == pytest.approx(0.5)
    assert roofline_fraction(1e6, 1e10, 20.0, PEAKS, "tf32") == pytest.approx(0.5)  # memory
    assert roofline_fraction(0.0, 1.0, 1.0, PEAKS, "ieee") is None


def test_the_best_parent_is_the_fastest_that_verified_and_generalizes():
    parents = [
        parent(Status.OK, 1.0, generalizes="no"),
        parent(Status.INCORRECT),
        parent(Status.OK, 1.5),
        parent(Status.OK, 1.2),
    ]
    best = best_parent(parents)
    assert best is parents[3]


def test_the_log_says_why_a_verified_draft_that_fails_the_unseen_sizes_is_not_kept():
    from kforge_search.cli.bench_problem import progress_line

    unseen = "at the unseen sizes (batch_size=5): output 0 has wrong values in trial 1"
    fast = parent(Status.OK, 0.76, generalizes="no")
    fast = Parent(fast.draft, dataclasses.replace(fast.result, warnings=(unseen,)))
    line = progress_line("01_gemm", fast)
    assert "OK 0.7600 ms" in line and f"not kept: {unseen}" in line
    kept = progress_line("01_gemm", parent(Status.OK, 1.4))
    assert "OK 1.4000 ms" in kept and "not kept" not in kept
    assert "— why" in progress_line("01_gemm", parent(Status.INCORRECT))


def test_row_speedup_is_against_the_faster_baseline():
    work = Work(((1, 1024, 1024, 1024),), 0.0, 1e6)
    row = bench_row(PROBLEM, [parent(Status.OK, 1.0)], "", work, PEAKS, ())
    assert row.verified and row.speedup == pytest.approx(2.0)  # compile's 2.0 ms / 1.0 ms
    assert row.eager_ms == 3.0 and row.compile_ms == 2.0 and row.precision == "tf32x3"
    assert row.roofline == pytest.approx(2 * 1024**3 / (100e12 / 3) / 1e-3)


def test_rows_without_a_verified_draft_keep_the_baselines_and_the_reason():
    baselines = result(Status.OK).baselines
    row = bench_row(PROBLEM, [parent(Status.INCORRECT)], "", None, None, baselines)
    assert not row.verified and row.status == "INCORRECT" and row.eager_ms == 3.0
    unsupported = bench_row(PROBLEM, [], "unsupported: module Conv1d", None, None, ())
    assert unsupported.status == "unsupported: module Conv1d" and unsupported.attempts == 0


def test_summary_geomean_and_fast_p():
    rows = [
        BenchRow("a", "OK", best_ms=1.0, speedup=2.0, verified=True, roofline=0.5),
        BenchRow("b", "OK", best_ms=1.0, speedup=0.5, verified=True, roofline=0.7),
        BenchRow("c", "OK", best_ms=1.0, speedup=1.6, verified=True, roofline=0.9),
        BenchRow("d", "INCORRECT"),
    ]
    s = summarize(rows)
    assert s.problems == 4 and s.verified == 3
    assert s.geomean_speedup == pytest.approx(
        math.exp((math.log(2) + math.log(0.5) + math.log(1.6)) / 3)
    )
    # d, unverified, counts as 1.0x in the figure over every problem
    assert s.geomean_all == pytest.approx((2 * 0.5 * 1.6 * 1.0) ** 0.25)
    assert (s.fast_0, s.fast_1, s.fast_1_5) == (0.75, 0.5, 0.5)
    assert s.median_roofline == 0.7
    assert s.fast_1_by_little == 0


def test_the_summary_counts_fast_1s_rows_that_are_parity_within_noise():
    speedups = [1.004, 1.01, 1.0101, 1.0, 0.995, 2.0]
    rows = [BenchRow(str(i), "OK", best_ms=1.0, speedup=x, verified=True)
            for i, x in enumerate(speedups)]  # fmt: skip
    s = summarize(rows)
    assert s.fast_1 == pytest.approx(4 / 6)  # 1.004, 1.01, 1.0101, 2.0
    assert s.fast_1_by_little == 2  # 1.004 and 1.01: faster by 1% or less


def test_outputs_are_json_and_csv(tmp_path):
    rows = [BenchRow("a", "OK", 1.0, 2.0, 0.5, 2.0, "tf32x3", 0.4, 2, True)]
    json_path, csv_path = write_outputs(rows, summarize(rows), tmp_path, {"platform": "x"})
    data = json.loads(json_path.read_text())
    assert data["summary"]["fast_1"] == 1.0 and data["rows"][0]["precision"] == "tf32x3"
    (line,) = list(csv.DictReader(csv_path.open()))
    assert line["problem"] == "a" and float(line["speedup"]) == 2.0


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("bench")(bench_cmd)
    app.command("noop")(lambda: None)  # two commands: `bench` stays a subcommand
    return app


def bench(out, platform: str, *options: str, suite=PROBLEMS / "level2"):
    """`kforge bench SUITE --platform P --out OUT OPTIONS...` through the CLI."""
    args = ["bench", str(suite), "--platform", platform, "--out", str(out), *options]
    return CliRunner().invoke(_app(), args)


def test_bench_command_on_cpu_triton(tmp_path):
    out = bench(tmp_path, "cpu-triton", "--sizes", "ci", "--budget", "1", "--match", "06_gemm")
    assert out.exit_code == 0, out.output
    data = json.loads((tmp_path / "bench.json").read_text())
    (row,) = data["rows"]
    assert row["verified"] and row["status"] == "OK" and row["speedup"] is None  # interpreter
    assert data["summary"]["fast_0"] == 1.0
    assert (tmp_path / "bench.csv").is_file()
    assert (tmp_path / "best" / "06_gemm_add_leaky_relu.py").is_file()
    assert "geomean speedup" in out.output
    # the run's own rate: its drafts (the interpreter's times skip no unseen check)
    meta = data["meta"]
    assert meta["evaluations"] == row["attempts"] == 1 and meta["unseen_skipped"] == 0
    assert meta["evaluations_per_minute"] > 0 and "1 evaluations in" in out.output


def test_bench_jobs_run_problems_side_by_side_and_keep_the_suite_order(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    names = ["01_gemm_bias_relu", "06_gemm_add_leaky_relu", "11_gemm_max_scale"]
    for name in names:
        shutil.copy(PROBLEMS / "level2" / f"{name}.py", suite)
    out = bench(tmp_path / "out", "cpu-triton", "--sizes", "ci", "--budget", "1", "--jobs", "2",
                suite=suite)  # fmt: skip
    assert out.exit_code == 0, out.output
    data = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert [row["problem"] for row in data["rows"]] == names
    assert all(row["verified"] for row in data["rows"]) and data["meta"]["jobs"] == 2
    refused = bench(tmp_path / "out", "cpu-cpp", "--jobs", "2", "--screen", "4", suite=suite)
    assert refused.exit_code != 0 and "--jobs 1" in refused.output


def test_bench_command_refuses_an_empty_suite(tmp_path):
    out = bench(tmp_path, "cpu-triton", "--match", "nothing")
    assert out.exit_code != 0 and "no problems" in out.output


@pytest.mark.slow
def test_bench_command_on_cpu_cpp_with_baselines(tmp_path):
    out = bench(tmp_path, "cpu-cpp", "--sizes", "ci", "--budget", "2", "--match", "13_gemm")
    assert out.exit_code == 0, out.output
    (row,) = json.loads((tmp_path / "bench.json").read_text())["rows"]
    assert row["verified"] and row["attempts"] == 2
    assert row["eager_ms"] and row["compile_ms"] and row["speedup"] and row["roofline"]


def test_resume_keeps_earlier_rows_and_refuses_another_policy(tmp_path):
    kept = BenchRow("01_gemm_bias_relu", "OK", 3.0, 2.0, 1.0, 2.0, "tf32x3", verified=True)
    meta = {"policy": "strict", "platform": "cpu-triton"}
    write_outputs([kept], summarize([kept]), tmp_path, meta)
    one = PROBLEMS / "level2" / "01_gemm_bias_relu.py"
    out = bench(tmp_path, "cpu-triton", "--sizes", "ci", "--resume", suite=one)
    assert out.exit_code == 0, out.output
    assert "kept from the earlier run" in out.output
    (row,) = json.loads((tmp_path / "bench.json").read_text())["rows"]
    assert row == dataclasses.asdict(kept)  # not evaluated again
    refused = bench(tmp_path, "cpu-triton", "--resume", "--policy", "loose", suite=one)
    assert refused.exit_code != 0 and "holds a strict run on cpu-triton" in refused.output


@pytest.mark.slow
def test_bench_screens_genomes_before_the_evaluator(tmp_path):
    out = bench(tmp_path, "cpu-cpp", "--sizes", "ci", "--budget", "1", "--screen", "4",
                "--match", "01_gemm")  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "screened 4 genomes in-process" in out.output
    (row,) = json.loads((tmp_path / "bench.json").read_text())["rows"]
    assert row["verified"] and row["attempts"] == 1 and "screened 1 of 4" in row["message"]


def _gemm_problem(doc: str, in_features: str, out_features: str, init: str = "") -> str:
    """A Linear + ReLU problem in KernelBench's style; `init` ends Model.__init__."""
    sizes = f'{{"batch_size": 4, "in_features": {in_features}, "out_features": {out_features}}}'
    return f'''"""{doc}"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
{init}
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


batch_size = 4
in_features = {in_features}
out_features = {out_features}

KFORGE_SIZES = {{"ci": {sizes}}}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
'''


# fails where the reference runs; the agent's trace (on the meta device) passes
BROKEN_REFERENCE = _gemm_problem(
    "A reference that raises.",
    "32",
    "16",
    "        if not self.linear.weight.is_meta:\n"
    '            raise RuntimeError("this reference is broken on purpose")\n',
)
# a 64 GiB weight: more than the machine has (the reference's child refuses it, measured on
# the meta device: evaluator/footprint.py); traced for free
TOO_BIG = _gemm_problem("A reference past the memory limit.", "131072", "131072")
# a 64 GiB scratch tensor the footprint does not see: past the child's memory limit
OUT_OF_MEMORY = _gemm_problem(
    "A reference out of memory.",
    "32",
    "16",
    "        if not self.linear.weight.is_meta:\n            self.scratch = torch.empty(2**34)\n",
)


def _unrunnable_suite(root):
    """A good problem beside four that cannot be run: reference raises, reference too large
    for the machine, reference out of memory, the agent raises (a good problem, see the
    test's monkeypatch)."""
    suite = root / "suite"
    suite.mkdir()
    good = (PROBLEMS / "level2" / "06_gemm_add_leaky_relu.py").read_text()
    (suite / "01_reference_raises.py").write_text(BROKEN_REFERENCE)
    (suite / "02_reference_too_big.py").write_text(TOO_BIG)
    (suite / "02b_reference_out_of_memory.py").write_text(OUT_OF_MEMORY)
    (suite / "03_agent_raises.py").write_text(good)
    (suite / "04_good.py").write_text(good)
    return suite


def test_bench_records_problems_that_cannot_run_and_goes_on(tmp_path, monkeypatch):
    from kforge_search.agents.builtin import BuiltinAgent

    propose = BuiltinAgent.propose

    def choke(self, context):
        if context.problem.name == "03_agent_raises":
            raise KeyError("a template the agent lost")
        return propose(self, context)

    monkeypatch.setattr(BuiltinAgent, "propose", choke)
    suite = _unrunnable_suite(tmp_path)
    out = bench(tmp_path / "out", "cpu-triton", "--sizes", "ci", "--budget", "1", "--jobs", "2",
                "--format", "json", suite=suite)  # fmt: skip
    assert out.exit_code == 0, out.output
    data = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert json.loads(out.stdout) == data["rows"]  # --format json: stdout is the rows alone
    rows = {row["problem"]: row for row in data["rows"]}
    assert list(rows) == ["01_reference_raises", "02_reference_too_big",
                          "02b_reference_out_of_memory", "03_agent_raises", "04_good"]  # fmt: skip
    raised, too_big, oom, agent, good = rows.values()
    assert raised["status"] == "REFERENCE_FAILED" and "broken on purpose" in raised["message"]
    assert too_big["status"] == oom["status"] == "REFERENCE_FAILED"
    assert "this machine has" in too_big["message"], too_big["message"]
    assert "--set NAME=VALUE on its sizes (batch_size=4" in too_big["message"]
    assert "ran out of host memory" in oom["message"], oom["message"]
    assert "can't allocate memory" in oom["message"]
    assert agent["status"] == "AGENT_ERROR"
    assert agent["message"] == "KeyError: 'a template the agent lost'"
    assert good["verified"] and good["status"] == "OK"
    assert data["summary"]["unrunnable"] == 4 and data["summary"]["verified"] == 1
    assert data["meta"]["complete"]
    with (tmp_path / "out" / "bench.csv").open() as f:
        assert [r["status"] for r in csv.DictReader(f)] == [
            "REFERENCE_FAILED", "REFERENCE_FAILED", "REFERENCE_FAILED", "AGENT_ERROR", "OK"
        ]  # fmt: skip
    assert "4 could not be run" in out.output


def test_resume_runs_again_what_an_agent_error_stopped(tmp_path):
    rows = [
        BenchRow("01_gemm_bias_relu", "AGENT_ERROR", message="KeyError: 'x'"),
        BenchRow("06_gemm_add_leaky_relu", "REFERENCE_FAILED", message="it exited with code 1"),
    ]
    write_outputs(rows, summarize(rows), tmp_path, {"policy": "strict", "platform": "cpu-triton"})
    kept = load_rows(tmp_path / "bench.json", "strict", "cpu-triton")
    assert list(kept) == ["06_gemm_add_leaky_relu"]  # a reference failure is the problem's


def test_bench_prints_whole_rows_to_a_pipe_and_as_csv(tmp_path):
    stem = "07_" + "_".join(["a_problem_name_long_enough_to_be_cut"] * 2)
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(PROBLEMS / "level2" / "06_gemm_add_leaky_relu.py", suite / f"{stem}.py")
    kept = BenchRow(stem, "INCORRECT", 3.0, 2.0, message="values differ: " + "why " * 30)
    meta = {"policy": "strict", "platform": "cpu-triton"}
    write_outputs([kept], summarize([kept]), tmp_path / "out", meta)
    run = functools.partial(
        bench, tmp_path / "out", "cpu-triton", "--sizes", "ci", "--resume", suite=suite
    )  # the rows are kept: nothing is evaluated
    piped = run()
    assert piped.exit_code == 0, piped.output
    lines = piped.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("problem\t"))
    (row,) = [line.split("\t") for line in lines[header + 1 :]]
    assert row[0] == stem and row[-1] == kept.message and row[1] == "3.0000"
    as_csv = run("--format", "csv")
    (line,) = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert line["problem"] == stem and line["message"] == kept.message
    assert float(line["eager_ms"]) == 3.0 and line["verified"] == "False"


def test_problems_go_smallest_device_share_first():
    """A large share waits for room and holds a thread and an evaluator meanwhile: problems
    go smallest share first, in the suite's order among equals (a run cut short keeps the
    most rows)."""
    from kforge_search.cli.bench_jobs import in_parallel

    ran: list[str] = []
    shares = {"a_huge": 1.3, "b": 0.1, "c_huge": 0.7, "d": 0.0, "e": 0.1}

    def run(problem, evaluator, lent=None):
        ran.append(problem)
        return BenchRow(problem, "OK"), []

    in_parallel(list(shares), run, object(), 1, lambda row, parents: None, shares.get)
    assert ran == ["d", "b", "e", "c_huge", "a_huge"]


def test_a_problem_refused_for_a_busy_device_runs_again_alone():
    """A reference that lacked device memory other jobs held (DeviceBusy) is no verdict on
    the problem: its row is DEVICE_BUSY, which the bench runs again, alone on the device, and
    --resume runs again."""
    from kforge_search.cli.bench_jobs import in_parallel
    from kforge_search.cli.bench_problem import unrunnable
    from kforge_search.problem import DeviceBusy
    from kforge_search.search.suite_bench import DEVICE_BUSY, RUN_AGAIN

    row = unrunnable(PROBLEM, DeviceBusy("the device has 4 GiB free of 140"), 1.0)
    assert row.status == DEVICE_BUSY and DEVICE_BUSY in RUN_AGAIN
    ran: list[str] = []
    rows: dict[str, str] = {}

    def run(problem, evaluator, lent=None):
        ran.append(problem)
        busy = problem == "b" and ran.count("b") == 1
        return BenchRow(problem, DEVICE_BUSY if busy else "OK"), []

    def finished(row, parents):
        rows[row.problem] = row.status

    in_parallel(["a", "b"], run, object(), 1, finished, lambda p: 0.1)
    assert ran == ["a", "b", "b"] and rows == {"a": "OK", "b": "OK"}


def test_ctrl_c_keeps_the_rows_so_far_and_ends_the_bench_at_once(tmp_path):
    """SIGINT to a bench with --jobs: the rows so far stay in bench.json (not complete), the
    problems in flight are dropped for --resume, and it ends at once (exit 130) instead of
    waiting for the evaluations in flight (minutes each at published sizes)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "kforge_search", "bench", str(PROBLEMS / "level2"),
           "--platform", "cpu-triton", "--sizes", "ci", "--budget", "1", "--jobs", "2",
           "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not (out / "bench.json").exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert (out / "bench.json").exists(), "no problem finished in 300 s"
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, stderr = proc.communicate(timeout=60)
        assert time.monotonic() - sent < 30, "the bench waited for the problems in flight"
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "--resume runs the others" in stderr
    data = json.loads((out / "bench.json").read_text())
    assert data["meta"]["complete"] is False and len(data["rows"]) >= 1


def test_drafts_that_ran_out_of_a_crowded_device_make_the_row_device_busy():
    """A draft's RUNTIME_ERROR with the device:busy reason (its child ran out of device
    memory while other processes held a quarter of it: worker.busy_reasons) is not the
    problem's verdict: the row is DEVICE_BUSY, run again alone. Without it, as it was."""
    import dataclasses

    from kforge_search.evaluator.result import DEVICE_BUSY_REASON, Artifacts
    from kforge_search.search.suite_bench import DEVICE_BUSY

    plain = parent(Status.RUNTIME_ERROR)
    busy = Parent(
        plain.draft,
        dataclasses.replace(plain.result, artifacts=Artifacts(reasons=(DEVICE_BUSY_REASON,))),
    )
    assert bench_row(PROBLEM, [plain, busy], "", None, None).status == DEVICE_BUSY
    assert bench_row(PROBLEM, [plain, plain], "", None, None).status == "RUNTIME_ERROR"
    ok = parent(Status.OK, 1.0)
    assert bench_row(PROBLEM, [busy, ok], "", None, None).status == "OK"


def test_the_benchs_compile_workers_share_the_host_among_its_jobs_and_shards(monkeypatch):
    from kforge_search.cli.bench import compile_threads

    monkeypatch.setattr("os.cpu_count", lambda: 64)
    assert compile_threads(1, 1) == 0  # alone: torch's default
    assert compile_threads(4, 3) == 5 and compile_threads(6, 1) == 10
    assert compile_threads(64, 4) == 1  # never none


def test_the_progress_line_of_a_failed_draft_says_why(tmp_path, monkeypatch):
    """A run cut short leaves its log: a failed draft's line carries its message's first
    line (on the H200, REJECTED drafts of right kernels could not be told apart)."""
    import dataclasses

    from kforge_search.agents.builtin import BuiltinAgent

    propose = BuiltinAgent.propose

    def off_by_one(self, context):
        wrong = (
            "\n_forward = ModelNew.forward\nModelNew.forward = lambda s, *a: _forward(s, *a) + 1\n"
        )
        return [dataclasses.replace(d, source=d.source + wrong) for d in propose(self, context)]

    monkeypatch.setattr(BuiltinAgent, "propose", off_by_one)
    out = bench(tmp_path, "cpu-triton", "--sizes", "ci", "--budget", "1", "--match", "06_gemm")
    assert out.exit_code == 0, out.output
    (row,) = json.loads((tmp_path / "bench.json").read_text())["rows"]
    assert not row["verified"] and row["message"], row
    line = next(x for x in out.output.splitlines() if f"{row['status']} " in x and "(" in x)
    assert f" — {row['message'][:40]}" in " ".join(out.output.split()), (line, row["message"])


def test_problems_in_flight_at_ctrl_c_leave_no_row(tmp_path, monkeypatch):
    """Ctrl-C ends the problems in flight by closing their evaluators' children; what their
    evaluations then say (a reference "died with SIGKILL": REFERENCE_FAILED) is no verdict
    on the problem: no row, so that --resume runs it."""
    import threading

    import pytest

    from kforge_search.cli.bench_jobs import in_parallel
    from kforge_search.evaluator import Evaluator

    monkeypatch.setenv("KFORGE_CACHE_DIR", str(own_cache(tmp_path / "cache")))
    started, release, ended = threading.Event(), threading.Event(), threading.Event()
    rows: list[str] = []

    def run(problem, evaluator, lent=None):
        if problem == "in_flight":
            started.set()
            release.wait(30)
            ended.set()
            return BenchRow(problem, "REFERENCE_FAILED"), []
        assert started.wait(30)
        return BenchRow(problem, "OK"), []

    def finished(row, parents):
        rows.append(row.problem)
        if row.problem == "first":
            raise KeyboardInterrupt  # as the main thread gets it, while "in_flight" runs

    shares = {"first": 0.0, "in_flight": 0.1}
    first = Evaluator()
    try:
        with pytest.raises(KeyboardInterrupt):
            in_parallel(list(shares), run, first, 2, finished, shares.get)
        release.set()
        assert ended.wait(30)
        for thread in threading.enumerate():
            if thread.name.startswith("bench"):
                thread.join(30)
    finally:
        first.close()
    assert rows == ["first"]
