"""`kforge bench --gpus N` (cli/bench_gpus.py): a bench process per GPU on its shard, then one
table of their rows. Here on the CPU (cpu-triton, whose children ignore CUDA_VISIBLE_DEVICES):
real bench processes, their merge, and Ctrl-C reaching each of them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading

import pytest
from typer.testing import CliRunner

from kforge_search.cli.app import app
from kforge_search.cli.bench_gpus import (
    bench_argv,
    bench_on_gpus,
    gpus_for,
    merge_command,
    shards_of,
)
from tests.conftest import PROBLEMS

NAMES = ["06_gemm_add_leaky_relu", "11_gemm_max_scale"]
MORE = ["01_gemm_bias_relu", "05_gemm_scale_clamp_min", *NAMES]  # two a shard


def _suite(tmp_path, names=NAMES):
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in names:
        shutil.copy(PROBLEMS / "level2" / f"{name}.py", suite)
    return suite


def _argv(suite) -> list[str]:
    return bench_argv(str(suite), "cpu-triton", "strict", 1, "ci", None, None, 0, 0, False,
                      None, 1)  # fmt: skip


def test_the_gpus_are_the_visible_ones_first_and_too_few_say_how_many_there_are():
    assert gpus_for(2, None, 4) == ["0", "1"]
    assert gpus_for(2, "3,5,6", 8) == ["3", "5"]  # CUDA_VISIBLE_DEVICES as the user set it
    with pytest.raises(ValueError, match="CUDA_VISIBLE_DEVICES=3; give --gpus 1 or fewer"):
        gpus_for(2, "3", 8)
    with pytest.raises(ValueError, match="2 GPU\\(s\\) present; give --gpus 2 or fewer"):
        gpus_for(4, None, 2)
    with pytest.raises(ValueError, match="needs 2 or more"):
        gpus_for(1, None, 2)


def test_a_gpu_whose_bench_wrote_no_table_is_left_out_of_the_merge(tmp_path):
    shards = shards_of(tmp_path, ["0", "1"])
    shards[1].out.mkdir(parents=True)
    (shards[1].out / "bench.json").write_text("{}")
    command = merge_command(["suite"], shards, tmp_path)
    merged = [command[i + 1] for i, a in enumerate(command) if a == "--merge"]
    assert merged == [str(shards[1].out)]  # gpu0's problems: NOT_RUN


def test_each_gpu_benches_its_shard_and_one_table_holds_every_row(tmp_path):
    suite, out, lines = _suite(tmp_path), tmp_path / "out", []
    merge = [*_argv(suite), "--format", "json"]
    code = bench_on_gpus(_argv(suite), merge, ["0", "1"], out, lines.append)
    assert code == 0, "\n".join(lines)
    for i, name in enumerate(NAMES):  # shard I: the suite's problem I (of 2)
        (row,) = json.loads((out / f"gpu{i}" / "bench.json").read_text())["rows"]
        assert row["problem"] == name and row["verified"]
        assert f"[gpu{i}] {name}: OK" in "\n".join(lines)
        assert f"{name}: OK" in (out / f"gpu{i}.log").read_text()
    data = json.loads((out / "bench.json").read_text())
    assert [r["problem"] for r in data["rows"]] == NAMES and data["summary"]["verified"] == 2
    assert data["meta"]["merged"] == [str(out / "gpu0"), str(out / "gpu1")]
    assert sorted(p.name for p in (out / "best").iterdir()) == [f"{n}.py" for n in NAMES]


def test_ctrl_c_reaches_every_gpus_bench_and_their_rows_are_merged(tmp_path):
    suite, out, lines = _suite(tmp_path, MORE), tmp_path / "out", []

    def echo(line: str) -> None:  # a shard's first row printed: Ctrl-C this process
        lines.append(line)
        if ": OK " in line and "SIGINT" not in lines:
            lines.append("SIGINT")
            threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()

    merge = [*_argv(suite), "--format", "json"]
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)  # (a worker's may differ)
    try:
        code = bench_on_gpus(_argv(suite), merge, ["0", "1"], out, echo)
    finally:
        signal.signal(signal.SIGINT, saved)
    said = "\n".join(lines)
    assert code == 130, said
    assert "[gpu0] interrupted" in said and "[gpu1] interrupted" in said
    assert "the same command with --resume runs the others" in said
    data = json.loads((out / "bench.json").read_text())  # every problem: kept, or NOT_RUN
    assert sorted(r["problem"] for r in data["rows"]) == sorted(MORE)
    kept = [r["problem"] for r in data["rows"] if r["status"] == "OK"]
    assert kept and len(kept) < len(MORE) and data["summary"]["not_run"] == len(MORE) - len(kept)


def test_the_cli_refuses_gpus_off_cuda_and_with_options_it_does_not_take(tmp_path):
    runner = CliRunner()
    args = ["bench", str(_suite(tmp_path)), "--platform", "cpu-triton", "--gpus", "2"]
    off = runner.invoke(app, args)
    assert off.exit_code != 0 and "--gpus is for CUDA platforms" in off.output
    assert "leave out --gpus" in off.output
    shard = runner.invoke(app, [*args, "--shard", "0/2"])  # (--gpus makes the shards)
    assert shard.exit_code != 0 and "--shard is not an option of --gpus" in shard.output
    both = runner.invoke(app, [*args, "--throughput"])
    assert both.exit_code != 0 and "--gpus is not an option of --throughput" in both.output
