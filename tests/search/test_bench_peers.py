"""kforge bench rows and summary with peers: the speedup of record over the fastest setting
that passes the policy, named in `peer`, the fp32-only speedup beside it."""

from __future__ import annotations

import csv
import json
import math

import pytest

from kforge_search.agents.base import Draft, Parent
from kforge_search.agents.builtin import TritonGenome
from kforge_search.evaluator.result import Baseline, EvalResult, PeerCheck, Status, TimingStats
from kforge_search.problem import resolve_problem
from kforge_search.search.suite_bench import (
    BenchRow,
    bench_row,
    load_rows,
    summarize,
    write_outputs,
)

PROBLEM = resolve_problem("level2/01_gemm_bias_relu", size_set="ci")


def timing(ms: float) -> TimingStats:
    return TimingStats("cuda_events", 50, ms, ms, ms)


def parent(policy: str) -> Parent:
    baselines = (
        Baseline("eager", True, timing(3.0)),
        Baseline("compile", True, timing(2.0), checks=(PeerCheck("strict", True),
                                                       PeerCheck("loose", True))),
        Baseline("compile-tf32", True, timing(0.5), checks=(PeerCheck("strict", False),
                                                            PeerCheck("loose", True))),
    )  # fmt: skip
    result = EvalResult(Status.OK, "ok", "done", PROBLEM.id, PROBLEM.name, "cuda-triton",
                        policy, "h", timing=timing(1.0), baselines=baselines)  # fmt: skip
    draft = Draft("# draft", "cuda-triton", "builtin", "note", TritonGenome(), "tf32x3")
    return Parent(draft, result)


def test_a_row_is_over_its_peer_of_record_with_the_fp32_figure_beside_it():
    loose = bench_row(PROBLEM, [parent("loose")], "", None, None)
    assert (loose.peer, loose.speedup, loose.speedup_fp32) == ("compile-tf32", 0.5, 2.0)
    strict = bench_row(PROBLEM, [parent("strict")], "", None, None)
    assert (strict.peer, strict.speedup, strict.speedup_fp32) == ("compile", 2.0, 2.0)
    assert loose.eager_ms == 3.0 and loose.compile_ms == 2.0  # fp32 columns as before


def test_the_summary_gives_both_geomeans_and_the_outputs_both_columns(tmp_path):
    rows = [
        BenchRow("a", "OK", best_ms=1.0, speedup=0.5, verified=True, peer="compile-tf32",
                 speedup_fp32=2.0),
        BenchRow("b", "OK", best_ms=1.0, speedup=2.0, verified=True, peer="eager",
                 speedup_fp32=2.0),
        BenchRow("c", "INCORRECT"),
    ]  # fmt: skip
    s = summarize(rows)
    assert s.geomean_speedup == pytest.approx(1.0) and s.geomean_fp32 == pytest.approx(2.0)
    assert s.geomean_all == pytest.approx(1.0) and s.geomean_all_fp32 == pytest.approx(4 ** (1 / 3))
    assert s.fast_1 == pytest.approx(1 / 3)  # over the peer of record
    json_path, csv_path = write_outputs(rows, s, tmp_path, {"policy": "loose", "platform": "x"})
    data = json.loads(json_path.read_text())
    assert data["rows"][0]["peer"] == "compile-tf32" and data["summary"]["geomean_fp32"] == 2.0
    line = next(csv.DictReader(csv_path.open()))
    assert (line["peer"], float(line["speedup"]), float(line["speedup_fp32"])) == (
        "compile-tf32", 0.5, 2.0,
    )  # fmt: skip
    assert math.isclose(s.geomean_all_fp32, 4 ** (1 / 3))


def test_a_row_from_before_peers_keeps_its_speedup_as_the_fp32_figure(tmp_path):
    old = {"problem": "a", "status": "OK", "eager_ms": 3.0, "compile_ms": 2.0, "best_ms": 1.0,
           "speedup": 2.0, "verified": True}  # fmt: skip
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"meta": {"policy": "strict", "platform": "x"}, "rows": [old]}))
    (row,) = load_rows(path, "strict", "x").values()
    assert (row.speedup, row.speedup_fp32, row.peer) == (2.0, 2.0, "")
