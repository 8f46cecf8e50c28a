from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

from typer.testing import CliRunner

from kforge_search.cli.app import app
from tests.conftest import BROKEN, EXAMPLES, FOREIGN_SUITE

runner = CliRunner()
CHAIN = "level1/10_elementwise_chain"


def test_cli_start_imports_neither_torch_nor_ray():
    code = (
        "import sys, kforge_search.cli.app; "
        "print(sorted(m for m in ('torch', 'ray', 'triton', 'duckdb') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_eval_json_of_an_honest_candidate():
    result = runner.invoke(
        app,
        [
            "eval",
            str(EXAMPLES / "triton/elementwise_chain.py"),
            "--problem",
            CHAIN,
            "--platform",
            "cpu-triton",
            "--sizes",
            "ci",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["status"] == "OK"
    assert data["policy"] == "strict"
    assert data["sizes"] == {"batch_size": 16, "dim": 1000}
    assert data["timing"]["meaningful"] is False


def test_eval_report_of_a_broken_candidate_is_actionable():
    result = runner.invoke(
        app,
        [
            "eval",
            str(BROKEN / "triton/wrong_values.py"),
            "--problem",
            CHAIN,
            "--platform",
            "cpu-triton",
            "--sizes",
            "ci",
            "--policy",
            "strict",
        ],
    )
    assert result.exit_code == 1
    assert "INCORRECT" in result.output
    assert "First mismatches at" in result.output and "expected [" in result.output


def test_bad_input_gets_a_clear_error():
    cases = [
        (["eval", "missing.py", "--problem", CHAIN, "--platform", "cpu-cpp"], "no candidate file"),
        (
            ["eval", str(EXAMPLES / "triton/softmax.py"), "--problem", CHAIN, "--platform", "tpu"],
            "unknown platform 'tpu'",
        ),
        (
            [
                "eval",
                str(EXAMPLES / "triton/softmax.py"),
                "--problem",
                CHAIN,
                "--platform",
                "mps-metal",
            ],
            "declared only",
        ),
        (["problems", "show", CHAIN, "--sizes", "huge"], "no size set 'huge'"),
        (["problems", "show", CHAIN, "--set", "nope=3"], "cannot override nope"),
        (["problems", "show", "nope"], "no problem 'nope'"),
        (
            ["search", CHAIN, "--platform", "cpu-cpp", "--in-flight", "0"],
            "--in-flight 0: needs >= 1",
        ),
    ]
    for args, says in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert "Error:" in result.output and says in result.output, result.output


def test_problems_list_and_show():
    listed = runner.invoke(app, ["problems", "list", str(FOREIGN_SUITE)])
    assert listed.exit_code == 0 and "19_ReLU" in listed.output and "2 problems" in listed.output
    shown = runner.invoke(app, ["problems", "show", CHAIN, "--sizes", "ci"])
    assert (
        shown.exit_code == 0 and "batch_size=16" in shown.output and "class Model" in shown.output
    )


def test_problems_list_prints_whole_names_to_a_pipe_and_as_json_or_csv(tmp_path):
    stem = "99_" + "_".join(["a_name_long_enough_to_be_cut_in_a_table"] * 2)
    assert len(stem) > 70
    (tmp_path / f"{stem}.py").write_text((FOREIGN_SUITE / "level1" / "19_ReLU.py").read_text())
    listed = runner.invoke(app, ["problems", "list", str(tmp_path)])
    assert listed.exit_code == 0, listed.output
    header, row = listed.stdout.splitlines()  # not a terminal: tab-separated, values whole
    assert header.split("\t") == ["id", "name", "size sets", "constants"]
    assert stem in row.split("\t")[1] and "…" not in row
    assert "1 problems" in listed.stderr
    as_json = runner.invoke(app, ["problems", "list", str(tmp_path), "--format", "json"])
    (problem,) = json.loads(as_json.stdout)
    assert stem in problem["name"] and problem["size_sets"] == ["ci", "unseen"]
    assert problem["constants"]["dim"] == 16384
    as_csv = runner.invoke(app, ["problems", "list", str(tmp_path), "--format", "csv"])
    (line,) = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert stem in line["name"] and json.loads(line["size_sets"]) == ["ci", "unseen"]


def test_platforms_lists_every_platform_with_a_reason():
    result = runner.invoke(app, ["platforms"])
    assert result.exit_code == 0
    for name in (
        "cuda-triton",
        "cuda-cpp",
        "cpu-cpp",
        "cpu-triton",
        "xpu-triton",
        "mps-metal",
        "cuda-cute",
    ):
        assert name in result.output
    assert "declared only" in result.output


def test_baseline_times_eager_and_compile_then_caches():
    args = ["baseline", "level1/10_elementwise_chain", "--platform", "cpu-cpp", "--sizes", "ci"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    for kind in ("eager", "compile"):
        row = next(line for line in first.output.splitlines() if kind in line)
        assert "exited" not in row and "failed" not in row, first.output
    again = runner.invoke(app, [*args, "--format", "json"])
    assert again.exit_code == 0, again.output
    rows = json.loads(again.stdout)
    assert [(r["baseline"], r["cached"]) for r in rows] == [
        ("eager", True), ("compile", True), ("eager-bf16", True), ("compile-bf16", True),
    ]  # fmt: skip
    assert rows[1]["passes"] == ["strict", "loose"]  # compile checked against the reference
    assert "changes no output" in rows[2]["error"]  # no matmul: bf16 is no peer here


def test_eval_records_its_result_in_the_database(tmp_path):
    db = str(tmp_path / "k.duckdb")
    result = runner.invoke(
        app,
        [
            "eval",
            str(EXAMPLES / "triton/elementwise_chain.py"),
            "--problem",
            CHAIN,
            "--platform",
            "cpu-triton",
            "--sizes",
            "ci",
            "--json",
            "--no-baselines",
            "--db",
            db,
        ],
    )
    assert result.exit_code == 0, result.output
    candidate = json.loads(result.stdout)["candidate_hash"]
    shown = runner.invoke(app, ["db", "show", candidate, "--db", db])
    assert shown.exit_code == 0, shown.output
    assert "OK" in shown.output and "@triton.jit" in shown.output
