"""`kforge search` on the session's real local Ray cluster: two problems on cpu-cpp, every
evaluation recorded once by the writer actor, with lineages and parent links."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kforge_search.cli.app import app
from kforge_search.store.reader import Reader

pytestmark = pytest.mark.usefixtures("ray_cluster")

PROBLEMS = ["level2/01_gemm_bias_relu", "level2/05_gemm_scale_clamp_min"]


def test_search_records_every_evaluation_once_with_parent_links(tmp_path):
    db = tmp_path / "k.duckdb"
    args = ["search", *PROBLEMS, "--platform", "cpu-cpp", "--sizes", "ci"]
    args += ["--lineages", "2", "--generations", "2", "--db", str(db)]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    assert "(known)" in out.output and "generations" in out.output
    reader = Reader.open(db)
    try:
        (run,) = reader.query("SELECT kind, status FROM runs").rows
        assert run == ("search", "finished")
        rows = reader.query(
            "SELECT c.id, c.lineage_id, c.generation, c.pass_kind, c.parent_ids, e.status "
            "FROM candidates c JOIN evaluations e ON e.candidate_id = c.id"
        ).dicts()
    finally:
        reader.close()
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)) >= 6  # no kernel evaluated twice
    assert all(r["status"] == "OK" for r in rows)
    roots = [r for r in rows if not r["parent_ids"]]
    children = [r for r in rows if r["parent_ids"]]
    assert len(roots) == 2 and all(r["pass_kind"] == "functional" for r in roots)
    assert children and all(r["pass_kind"] == "optimization" for r in children)
    assert all(set(r["parent_ids"]) <= set(ids) for r in children)
    assert {r["lineage_id"].split("@")[0] for r in rows} == set(PROBLEMS)
