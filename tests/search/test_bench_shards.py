"""kforge bench over several runs: --shard splits a suite (one shard per GPU), --merge makes
one table of their rows without running anything, --rest-of goes on from an earlier run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from kforge_search.search.suite_bench import BenchRow, summarize, write_outputs
from tests.conftest import PROBLEMS
from tests.search.test_suite_bench import bench

NAMES = ["01_gemm_bias_relu", "02_gemm_gelu_scale", "03_gemm_swish_bias"]


def _suite(tmp_path: Path, names: list[str]) -> tuple[Path, list[str]]:
    """A folder of these bundled level-2 problems."""
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in names:
        shutil.copy(PROBLEMS / "level2" / f"{name}.py", suite)
    return suite, names


def test_shards_run_their_own_problems_and_merge_into_one_table(tmp_path):
    """--shard I/N takes every Nth problem of the suite (one shard per GPU, each its own
    --out); --merge makes one table and summary of other runs' rows (and gathers their best
    kernels) without running anything: a problem none of them has is NOT_RUN."""
    suite, names = _suite(tmp_path, NAMES)
    meta = {"policy": "strict", "platform": "cpu-triton"}
    rows = [BenchRow(n, "OK", 3.0, 2.0, 1.0, 2.0, "ieee", verified=True) for n in names]
    for i, shard_rows in enumerate([[rows[0], rows[2]], [rows[1]]]):
        write_outputs(shard_rows, summarize(shard_rows), tmp_path / f"s{i}", meta)
        (tmp_path / f"s{i}" / "best").mkdir()
        for row in shard_rows:
            (tmp_path / f"s{i}" / "best" / f"{row.problem}.py").write_text(f"# {row.problem}")
    second = bench(tmp_path / "s1", "cpu-triton", "--shard", "1/2", "--resume", suite=suite)
    assert second.exit_code == 0, second.output
    data = json.loads((tmp_path / "s1" / "bench.json").read_text())
    assert [r["problem"] for r in data["rows"]] == ["02_gemm_gelu_scale"]
    assert data["meta"]["shard"] == "1/2"
    merged = tmp_path / "merged"
    out = bench(merged, "cpu-triton", "--merge", str(tmp_path / "s0"), "--merge",
                str(tmp_path / "s1"), suite=suite)  # fmt: skip
    assert out.exit_code == 0, out.output
    data = json.loads((merged / "bench.json").read_text())
    assert [r["problem"] for r in data["rows"]] == names  # the suite's order
    assert data["summary"]["verified"] == 3 and data["summary"]["problems"] == 3
    assert sorted(p.name for p in (merged / "best").iterdir()) == [f"{n}.py" for n in names]
    # a problem two runs have: the first run's row, and its kernel with it
    write_outputs(rows[:1], summarize(rows[:1]), tmp_path / "s2", meta)
    (tmp_path / "s2" / "best").mkdir()
    (tmp_path / "s2" / "best" / f"{names[0]}.py").write_text("# the second run's")
    both = bench(tmp_path / "both", "cpu-triton", "--merge", str(tmp_path / "s0"), "--merge",
                 str(tmp_path / "s2"), suite=suite)  # fmt: skip
    assert both.exit_code == 0, both.output
    assert (tmp_path / "both" / "best" / f"{names[0]}.py").read_text() == f"# {names[0]}"
    alone = bench(tmp_path / "z", "cpu-triton", "--merge", str(tmp_path / "s1"), suite=suite)
    assert alone.exit_code == 0 and "2 not run" in alone.output, alone.output
    data = json.loads((tmp_path / "z" / "bench.json").read_text())
    assert [r["status"] for r in data["rows"]] == ["NOT_RUN", "OK", "NOT_RUN"]
    assert data["summary"]["not_run"] == 2 and data["summary"]["verified"] == 1
    assert data["summary"]["geomean_all"] < data["summary"]["geomean_speedup"]
    for bad in ("2/2", "x/3", "1"):
        refused = bench(tmp_path / "x", "cpu-triton", "--shard", bad, suite=suite)
        assert refused.exit_code != 0 and "give I/N with 0 <= I < N" in refused.output
    loose = bench(tmp_path / "y", "cpu-triton", "--policy", "loose", "--merge",
                  str(tmp_path / "s0"), suite=suite)  # fmt: skip
    assert loose.exit_code != 0 and "holds a strict run on cpu-triton" in loose.output


def test_a_gpu_run_merges_on_a_machine_without_one(tmp_path):
    """--merge runs nothing: a GPU run's shards make their table on a laptop (before, the
    platform's check refused: 'cuda-triton cannot run on this machine'); a run asks for it."""
    suite, _ = _suite(tmp_path, NAMES[:1])
    row = BenchRow("01_gemm_bias_relu", "OK", 3.0, 2.0, 1.0, 2.0, "tf32x3", verified=True)
    write_outputs(
        [row], summarize([row]), tmp_path / "s0", {"policy": "strict", "platform": "cuda-triton"}
    )
    out = bench(tmp_path / "all", "cuda-triton", "--merge", str(tmp_path / "s0"), suite=suite)
    assert out.exit_code == 0, out.output
    (merged,) = json.loads((tmp_path / "all" / "bench.json").read_text())["rows"]
    assert merged["verified"] and merged["speedup"] == 2.0
    if not _has_cuda():
        run = bench(tmp_path / "run", "cuda-triton", "--budget", "1", suite=suite)
        assert run.exit_code != 0 and "cannot run on this machine" in run.output


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def test_rest_of_an_earlier_run_is_shared_evenly_by_the_shards_and_merged_with_it(tmp_path):
    """--rest-of FOLDER drops the problems an earlier run has rows for before --shard splits
    the suite: a run cut short goes on with every shard taking a fair part of what is left
    (by position in the whole suite, one shard had 9 left and another none). With --merge
    its rows join the table."""
    suite, names = _suite(tmp_path, NAMES)
    meta = {"policy": "strict", "platform": "cpu-triton"}
    rows = {n: BenchRow(n, "OK", 3.0, 2.0, 1.0, 2.0, "ieee", verified=True) for n in names}
    earlier = tmp_path / "earlier"
    write_outputs([rows[names[0]]], summarize([rows[names[0]]]), earlier, meta)
    for i in range(2):  # each shard's folder already holds the rows of both others
        write_outputs([rows[names[1]], rows[names[2]]], summarize(list(rows.values())),
                      tmp_path / f"s{i}", meta)  # fmt: skip
        out = bench(tmp_path / f"s{i}", "cpu-triton", "--shard", f"{i}/2", "--resume",
                    "--rest-of", str(earlier), suite=suite)  # fmt: skip
        assert out.exit_code == 0, out.output
        kept = json.loads((tmp_path / f"s{i}" / "bench.json").read_text())["rows"]
        assert [r["problem"] for r in kept] == [names[1 + i]]  # of the two left, one each
    merged = bench(tmp_path / "all", "cpu-triton", "--merge", str(tmp_path / "s0"), "--merge",
                   str(tmp_path / "s1"), "--rest-of", str(earlier), suite=suite)  # fmt: skip
    assert merged.exit_code == 0, merged.output
    data = json.loads((tmp_path / "all" / "bench.json").read_text())
    assert [r["problem"] for r in data["rows"]] == names and data["summary"]["not_run"] == 0
    whole = tmp_path / "whole"
    write_outputs(list(rows.values()), summarize(list(rows.values())), whole, meta)
    nothing = bench(tmp_path / "x", "cpu-triton", "--rest-of", str(whole), suite=suite)
    assert nothing.exit_code == 0 and "nothing to run" in nothing.output, nothing.output
    missing = bench(tmp_path / "y", "cpu-triton", "--rest-of", str(tmp_path / "z"), suite=suite)
    assert missing.exit_code != 0 and "--rest-of" in missing.output
