"""The peer of record in the store (schema migration 4): evaluations.peer, speedup and
speedup_fp32; baselines.checks and note; a version 3 file gains them and keeps its rows."""

from __future__ import annotations

import json
from dataclasses import replace

import duckdb
import pytest

from kforge_search.evaluator.result import Baseline, PeerCheck, TimingStats
from kforge_search.problem import resolve_problem
from kforge_search.store.from_eval import eval_records, record_eval_result
from kforge_search.store.records import BaselineRecord, EvaluationRecord
from kforge_search.store.schema import LATEST, MIGRATIONS
from kforge_search.store.to_eval import run_results
from kforge_search.store.writer import Writer
from tests.conftest import EXAMPLES
from tests.store.factories import eval_result

PROBLEM = resolve_problem("level2/01_gemm_bias_relu", size_set="ci")
SOURCE = (EXAMPLES / "cpu_cpp/gemm_bias_relu.py").read_text()
BF16 = Baseline(
    "eager-bf16",
    True,
    TimingStats("perf_counter", 50, 0.45, 0.5, 0.55),
    checks=(PeerCheck("strict", False, 2e-3, 1e-3, "trial 0 output 0: values"),
            PeerCheck("loose", True, 2e-3, 1e-3)),
)  # fmt: skip


def _result(policy: str):
    base = eval_result(PROBLEM, SOURCE)  # eager 2.0 ms, compile 1.5 ms, candidate 1.0 ms
    return replace(base, policy=policy, baselines=(*base.baselines, BF16))


def test_an_evaluation_row_names_its_peer_and_keeps_the_fp32_figure():
    *_, ev, _, _, bf16 = eval_records(_result("loose"), SOURCE, PROBLEM)
    # the bf16 peer (0.5 ms) is faster than the candidate (1.0 ms): 0.5x of record
    assert (ev.peer, ev.speedup, ev.speedup_fp32) == ("eager-bf16", 0.5, 1.5)
    assert ev.speedup_eager == 2.0 and ev.speedup_compile == 1.5
    assert [c["policy"] for c in json.loads(bf16.checks)] == ["strict", "loose"]
    *_, ev, _, _, _ = eval_records(_result("strict"), SOURCE, PROBLEM)
    assert (ev.peer, ev.speedup, ev.speedup_fp32) == ("compile", 1.5, 1.5)  # bf16 fails strict


def test_records_check_their_kinds_and_speedups():
    with pytest.raises(ValueError, match="unknown baseline kind"):
        BaselineRecord("b", "p", "hw", "cpu-cpp", "eager-fp8", True)
    with pytest.raises(ValueError, match="only OK is timed"):
        EvaluationRecord("e", "c", "p", "cpu-cpp", "hw", "INCORRECT", "verify", "strict",
                         speedup=2.0)  # fmt: skip


def test_a_resumed_result_has_its_peer_of_record_back(tmp_path):
    with Writer(tmp_path / "k.duckdb") as writer:
        recorded = record_eval_result(writer, _result("loose"), SOURCE, PROBLEM, run_id="r1")
        back = run_results(writer.reader(), ["r1"])[recorded.candidate_id]
    assert back.peer().kind == "eager-bf16" and back.speedup_of_record == pytest.approx(0.5)
    assert back.speedup_fp32 == pytest.approx(1.5)


def test_a_version_3_file_gains_the_peer_columns_and_keeps_its_rows(tmp_path):
    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    con.execute(
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, description VARCHAR "
        "NOT NULL, applied_at TIMESTAMP NOT NULL DEFAULT (now()::TIMESTAMP))"
    )
    for migration in MIGRATIONS[:3]:
        for statement in migration.statements:
            con.execute(statement)
        con.execute("INSERT INTO schema_version (version, description) VALUES (?, 'old')",
                    [migration.version])  # fmt: skip
    con.execute(
        "INSERT INTO evaluations (id, candidate_id, problem_id, platform, hardware_id, status, "
        "stage, policy, precision, speedup_eager, created_at) VALUES ('e1', 'c1', 'p1', "
        "'cpu-cpp', 'hw', 'OK', 'done', 'strict', 'fp32', 1.5, now()::TIMESTAMP)"
    )
    con.close()
    with Writer(db) as writer:
        assert writer.version == LATEST >= 4
        rows = (
            writer.reader()
            .query("SELECT id, speedup_eager, peer, speedup, speedup_fp32 FROM evaluations")
            .rows
        )
    assert rows == (("e1", 1.5, None, None, None),)
