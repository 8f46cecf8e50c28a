"""`kforge db`: query, best, lineage, show, export/import, stats, migrate, bench, eval --db."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from kforge_search.cli.db import record_eval
from kforge_search.evaluator import EvalConfig
from kforge_search.problem import resolve_problem
from kforge_search.store.records import ProfileRecord, RecommendationRecord
from kforge_search.store.schema import LATEST, TABLES
from kforge_search.store.writer import Writer
from tests.conftest import EXAMPLES
from tests.store.factories import candidate, cli_app, eval_result, evaluation, problem_record

app = cli_app()
runner = CliRunner()


def said(result) -> str:
    """The output with line breaks undone (rich wraps long messages at 80 columns)."""
    return " ".join(result.output.split())


def kforge(*args: str) -> str:
    """What `kforge db ARGS` printed; with --format, its stdout alone (the data: notes such as
    a row count go to stderr)."""
    result = runner.invoke(app, ["db", *args])
    assert result.exit_code == 0, result.output
    return result.stdout if "--format" in args else result.output


@pytest.fixture
def db(tmp_path):
    """Two problems; a lineage root -> child -> grandchild on cpu-cpp, one cuda-triton kernel."""
    relu = problem_record("gemm_relu", "torch.relu(self.linear(x))")
    gelu = problem_record("gemm_gelu", "torch.nn.functional.gelu(self.linear(x))")
    root = candidate(relu, "cpu-cpp", "root")
    child = candidate(relu, "cpu-cpp", "child", parent=root)
    grandchild = candidate(relu, "cpu-cpp", "grandchild", parent=child)
    triton = candidate(relu, "cuda-triton", "triton")
    other = candidate(gelu, "cpu-cpp", "gelu")
    path = tmp_path / "k.duckdb"
    with Writer(path) as writer:
        writer.write([relu, gelu, root, child, grandchild, triton, other])
        writer.write([
            evaluation(root, 1.1), evaluation(child, 0.0, "INCORRECT"),
            evaluation(grandchild, 2.5), evaluation(triton, 4.0), evaluation(other, 1.7),
            ProfileRecord(grandchild.id, "perf", '{"ipc": 2.1}', b"raw report"),
            RecommendationRecord(grandchild.id, "memory bound: fuse the bias", '["fuse"]'),
        ])  # fmt: skip
    return path, {"root": root, "child": child, "grandchild": grandchild, "triton": triton}


def test_query_prints_a_table_csv_or_json(db):
    path, c = db
    sql = "SELECT id, generation FROM candidates WHERE platform = 'cpu-cpp' ORDER BY generation"
    assert c["grandchild"].id in kforge("query", sql, "--db", str(path))
    rows = list(csv.reader(io.StringIO(kforge("query", sql, "--format", "csv", "--db", str(path)))))
    assert rows[0] == ["id", "generation"] and len(rows) == 5
    data = json.loads(kforge("query", sql, "--format", "json", "--db", str(path)))
    assert data[-1] == {"id": c["grandchild"].id, "generation": 2}


def test_query_cannot_write(db):
    path, _ = db
    result = runner.invoke(app, ["db", "query", "DELETE FROM candidates", "--db", str(path)])
    assert result.exit_code == 2 and "read-only" in said(result)


def test_best_ranks_verified_kernels(db):
    path, c = db
    out = kforge("best", "--db", str(path))
    assert out.index(c["triton"].id) < out.index(c["grandchild"].id)
    assert c["child"].id not in out  # INCORRECT
    out = kforge("best", "--problem", "gemm_relu", "--platform", "cpu-cpp", "--db", str(path))
    assert c["triton"].id not in out and c["grandchild"].id in out


LONG_NAME = "level9/" + "_".join(["a_problem_name_long_enough_to_be_cut"] * 3)


def test_best_prints_whole_values_to_a_pipe_and_as_json_or_csv(tmp_path):
    long = problem_record(LONG_NAME, "torch.relu(self.linear(x))")
    kernel = candidate(long, "cpu-cpp", "long")
    path = tmp_path / "k.duckdb"
    with Writer(path) as writer:
        writer.write([long, kernel])
        writer.write([evaluation(kernel, 1.5)])
    header, row = kforge("best", "--db", str(path)).splitlines()  # not a terminal: TSV
    assert header.split("\t")[:3] == ["candidate", "problem", "platform"]
    assert row.split("\t")[:3] == [kernel.id, LONG_NAME, "cpu-cpp"]
    (found,) = json.loads(kforge("best", "--format", "json", "--db", str(path)))
    assert found["problem"] == LONG_NAME and found["speedup_eager"] == 1.5
    assert found["candidate"] == kernel.id and found["generation"] == 0
    out = kforge("best", "--format", "csv", "--db", str(path))
    (line,) = list(csv.DictReader(io.StringIO(out)))
    assert line["problem"] == LONG_NAME and float(line["speedup_eager"]) == 1.5
    refused = runner.invoke(app, ["db", "best", "--format", "xml", "--db", str(path)])
    assert refused.exit_code == 2 and "use table, json or csv" in said(refused)


def test_stats_as_json_is_one_list_of_counts(db):
    path, _ = db
    counts = json.loads(kforge("stats", "--format", "json", "--db", str(path)))
    by = {(c["count_of"], c["name"]): c for c in counts}
    assert by[("rows", "candidates")]["count"] == 5
    assert by[("evaluations", "INCORRECT")]["count"] == 1
    assert by[("candidates", "cpu-cpp")]["verified"] == 3


def test_lineage_shows_the_ancestry_with_speedups(db):
    path, c = db
    out = kforge("lineage", c["grandchild"].id[:8], "--db", str(path))
    for name in ("grandchild", "child", "root"):
        assert c[name].id in out
    assert "INCORRECT" in out and "2.5" in out


def test_show_prints_source_evaluations_profile_and_recommendation(db):
    path, c = db
    out = kforge("show", c["grandchild"].id, "--db", str(path))
    assert "TAG = 'grandchild'" in out and "OK" in out and "perf" in out and "fuse the bias" in out


def test_unknown_candidate_is_an_error_with_a_hint(db):
    path, _ = db
    result = runner.invoke(app, ["db", "show", "ffffffff", "--db", str(path)])
    assert result.exit_code == 2 and "kforge db best" in said(result)


def test_export_import_round_trip(db, tmp_path):
    path, _ = db
    kforge("export", str(tmp_path / "a"), "--db", str(path))
    copy = tmp_path / "copy.duckdb"
    kforge("import", str(tmp_path / "a"), "--db", str(copy))
    again = kforge("import", str(tmp_path / "a"), "--db", str(copy))  # idempotent
    assert all(line.split()[-2:] != ["0", "1"] for line in again.splitlines())
    kforge("export", str(tmp_path / "b"), "--db", str(copy))
    for table in TABLES:
        a = pq.read_table(tmp_path / "a" / f"{table}.parquet")
        b = pq.read_table(tmp_path / "b" / f"{table}.parquet")
        assert a.equals(b), table
    assert kforge("best", "--db", str(path)) == kforge("best", "--db", str(copy))


def test_stats_and_migrate(db, tmp_path):
    path, _ = db
    out = kforge("stats", "--db", str(path))
    assert "candidates" in out and "INCORRECT" in out and "cuda-triton" in out
    out = kforge("migrate", "--db", str(tmp_path / "new.duckdb"))
    assert f"schema version {LATEST}" in " ".join(out.split())


def test_default_database_is_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KFORGE_DB", raising=False)
    result = runner.invoke(app, ["db", "stats"])
    assert result.exit_code == 2 and "no database at kforge.duckdb" in said(result)
    kforge("migrate")
    assert (tmp_path / "kforge.duckdb").is_file()


def test_eval_db_records_the_result(tmp_path):
    problem = resolve_problem("level2/01_gemm_bias_relu", size_set="ci")
    file = EXAMPLES / "cpu_cpp/gemm_bias_relu.py"
    result = eval_result(problem, file.read_text())
    path = tmp_path / "k.duckdb"
    record_eval(path, result, file, problem, EvalConfig(policy="strict"))
    out = kforge("best", "--db", str(path))
    assert result.candidate_hash in out and "level2/01_gemm_bias_relu" in out
    config = json.loads(kforge("query", "SELECT config FROM runs", "--format", "json",
                               "--db", str(path)))[0]["config"]  # fmt: skip
    assert json.loads(config)["policy"] == "strict"


def test_bench_at_a_tiny_size(tmp_path):
    out = kforge("bench", "--candidates", "300", "--evaluations", "600", "--problems", "12",
                 "--repeats", "1")  # fmt: skip
    assert "rows/s" in out
    for query in ("cross_platform", "similar_problems", "diverse_top_k", "one_shot_examples"):
        assert query in out


def test_the_db_cli_imports_no_heavy_module():
    code = (
        "import sys, kforge_search.cli.db; "
        "print(sorted(m for m in ('torch', 'ray', 'duckdb', 'pyarrow') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_export_writes_a_verified_kernel_and_keeps_what_exists(db, tmp_path):
    from kforge_search.cli.app import app as kforge_app

    path, c = db
    out = tmp_path / "kernels" / "gemm_relu.py"
    args = ["export", c["grandchild"].id[:8], "--out", str(out), "--db", str(path)]
    done = runner.invoke(kforge_app, args)
    assert done.exit_code == 0, said(done)
    text = out.read_text()
    assert text.startswith(f"# Exported by kforge: candidate {c['grandchild'].id} for gemm_relu")
    assert "verified; 2.50x vs eager" in text and text.endswith(c["grandchild"].source)
    again = runner.invoke(kforge_app, args)
    assert again.exit_code == 2 and "left as it is" in said(again)
    assert out.read_text() == text
    wrong = tmp_path / "wrong.py"
    refused = runner.invoke(
        kforge_app, ["export", c["child"].id, "--out", str(wrong), "--db", str(path)]
    )
    assert refused.exit_code == 2 and "has not verified" in said(refused) and not wrong.exists()
    forced = [*args, "--force"]
    assert runner.invoke(kforge_app, forced).exit_code == 0
