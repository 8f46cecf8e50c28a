"""Rows from an EvalResult: the fields `kforge eval --db` stores."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from kforge_search.evaluator.result import Artifacts, Mismatch, Status
from kforge_search.hardware import Peaks
from kforge_search.problem import resolve_problem
from kforge_search.store.from_eval import (
    Origin,
    Work,
    eval_records,
    record_eval_result,
    roofline_fraction,
)
from kforge_search.store.records import HardwareRecord
from kforge_search.store.writer import Writer
from tests.conftest import EXAMPLES
from tests.store.factories import eval_result

PROBLEM = resolve_problem("level2/01_gemm_bias_relu", size_set="ci")
SOURCE = (EXAMPLES / "cpu_cpp/gemm_bias_relu.py").read_text()


def test_an_ok_result_maps_to_rows():
    result = eval_result(PROBLEM, SOURCE)
    problem, hw, cand, ev, *baselines = eval_records(
        result, SOURCE, PROBLEM, origin=Origin(agent="writer", model="m1"), generalizes=True
    )
    assert problem.id == PROBLEM.id and problem.op_signature == "linear,relu"
    assert hw.device_name == "cpu" and hw.torch_version == "2.13.0"
    assert cand.id == result.candidate_hash and cand.agent == "writer"
    assert ev.status == "OK" and ev.stage == "done" and ev.error_kind == ""
    assert (ev.p20_ms, ev.p50_ms, ev.p80_ms, ev.runs) == (0.9, 1.0, 1.1, 50)
    assert ev.speedup_eager == pytest.approx(2.0) and ev.speedup_compile == pytest.approx(1.5)
    assert ev.policy == "strict" and ev.size_set == "ci" and ev.generalizes is True
    assert json.loads(ev.sizes) == PROBLEM.sizes
    assert [b.kind for b in baselines] == ["eager", "compile"]


def test_a_failure_keeps_its_kind_and_artifacts():
    mismatch = Mismatch(0, 0, "values", "[1.0]", "[2.0]", ((0, 1),), 3, 100)
    result = replace(
        eval_result(PROBLEM, SOURCE, status=Status.INCORRECT),
        artifacts=Artifacts(compile_log="x" * 200_000, mismatch=mismatch),
    )
    *_, ev = eval_records(result, SOURCE, PROBLEM)
    assert ev.error_kind == "mismatch:values" and ev.speedup_eager is None
    artifacts = json.loads(ev.artifacts)
    assert artifacts["mismatch"]["indices"] == [[0, 1]]
    assert len(artifacts["compile_log"]) < 70_000  # clipped, head and tail kept


def test_the_source_must_be_the_one_evaluated():
    with pytest.raises(ValueError, match="pass the source that was evaluated"):
        eval_records(eval_result(PROBLEM, SOURCE), SOURCE + "\nX = 1\n", PROBLEM)


def test_roofline_fraction():
    peaks = Peaks("gpu", 10.0, 10.0, 10.0, 1000.0, "datasheet")
    # 1 GFLOP at 10 TFLOP/s is 0.1 ms; 1 MB at 1000 GB/s is 1 us: compute-bound, 0.1 ms.
    assert roofline_fraction(Work(1e9, 1e6), 0.2, peaks) == pytest.approx(0.5)
    hw = HardwareRecord.create("gpu", "cpu-cpp", peaks=peaks)
    _, _, _, ev, *_ = eval_records(eval_result(PROBLEM, SOURCE), SOURCE, PROBLEM, hardware=hw,
                          work=Work(1e9, 1e6))  # fmt: skip
    assert ev.roofline_fraction == pytest.approx(0.1)  # p50 is 1.0 ms


def test_record_eval_result_writes_one_batch(tmp_path):
    with Writer(tmp_path / "k.duckdb") as writer:
        recorded = record_eval_result(writer, eval_result(PROBLEM, SOURCE), SOURCE, PROBLEM)
        again = record_eval_result(writer, eval_result(PROBLEM, SOURCE), SOURCE, PROBLEM)
        assert again.evaluation_id == recorded.evaluation_id and again.report.total_inserted == 0
        row = writer.reader().query("SELECT verified, score FROM kernels").rows
    assert row == ((True, pytest.approx(2.0)),)


def test_every_precision_an_agent_can_emit_is_stored():
    """A genome's GEMM precision (agents/builtin/genome.py) and an LLM draft's are
    evaluation rows' precisions: a search stopped at the first bf16x3 result when the store
    did not know it."""
    from kforge_search.agents.builtin.genome import PRECISIONS as GENOME
    from kforge_search.store.records import PRECISIONS as STORED

    assert set(GENOME) <= set(STORED)
