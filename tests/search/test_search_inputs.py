"""`kforge search` checks its inputs before anything starts: one `Error:` line, a non-zero
exit, Ray never started, an existing database unchanged; and the LLM settings it builds."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import ray
from typer.testing import CliRunner

from kforge_search.cli.app import app
from kforge_search.store.records import RunRecord
from kforge_search.store.writer import Writer

PROBLEM = "level2/01_gemm_bias_relu"


@pytest.fixture
def db(tmp_path):
    """An existing database with one run: what a failed check must leave as it is."""
    path = tmp_path / "k.duckdb"
    with Writer(path) as writer:
        writer.write([RunRecord("search", "{}", "t", "finished")])
        writer.checkpoint()
    return path


@pytest.fixture
def nothing_starts(monkeypatch):
    def start(*args, **kwargs):
        raise AssertionError("Ray was started")

    monkeypatch.setattr(ray, "init", start)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)


def _search(*args: str, db=None):
    where = ["--db", str(db)] if db is not None else []
    return CliRunner().invoke(app, ["search", *args, *where])


def _refused(out, *words: str) -> None:
    assert out.exit_code == 2, out.output
    said = " ".join(out.output.split())
    starts = [line for line in out.output.splitlines() if line.startswith("Error:")]
    assert said.startswith("Error: ") and len(starts) == 1, out.output
    assert "Traceback" not in out.output
    for word in words:
        assert word in said, out.output


BASE = (PROBLEM, "--platform", "cpu-cpp", "--sizes", "ci")


@pytest.mark.usefixtures("nothing_starts")
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--generations", "0"), ["--generations 0: needs >= 1"]),
        (("--lineages", "0"), ["--lineages 0: needs >= 1"]),
        (("--functional-passes", "0"), ["--functional-passes 0"]),
        (("--max-candidates", "0"), ["--max-candidates 0: needs >= 1"]),
        (("--max-minutes", "0"), ["--max-minutes 0: needs > 0"]),
        (("--workers", "0"), ["--workers 0"]),
        (("--max-llm-tokens", "0"), ["--max-llm-tokens 0"]),
        (("--llm-timeout", "0"), ["--llm-timeout 0: needs > 0"]),
        (("--llm-retries", "-1"), ["--llm-retries -1: needs >= 0"]),
        (("--max-output-tokens", "0"), ["--max-output-tokens 0"]),
    ],
)
def test_budgets_and_limits_below_their_least_are_refused(db, args, words):
    before = (db.read_bytes(), db.stat().st_mtime_ns)
    _refused(_search(*BASE, *args, db=db), *words)
    assert (db.read_bytes(), db.stat().st_mtime_ns) == before


@pytest.mark.usefixtures("nothing_starts")
def test_a_bad_platform_or_problem_is_refused(db):
    before = db.read_bytes()
    _refused(_search(PROBLEM, "--platform", "nosuch", db=db), "unknown platform 'nosuch'")
    out = _search("level9/none", "--platform", "cpu-cpp", db=db)
    assert out.exit_code == 2 and "no problem 'level9/none'" in " ".join(out.output.split())
    assert db.read_bytes() == before


@pytest.mark.usefixtures("nothing_starts")
def test_a_database_that_cannot_be_written_is_refused_before_ray(tmp_path, db):
    _refused(_search(*BASE, db="/proc/kforge-test.duckdb"), "no new file can be made in /proc")
    _refused(_search(*BASE, db=tmp_path), "is a folder")
    afile = tmp_path / "afile"
    afile.write_text("x")
    _refused(_search(*BASE, db=afile / "k.duckdb"), "is a file, not a folder")
    afile.write_text("not a database")
    _refused(_search(*BASE, db=afile), "not a valid DuckDB database file")
    holder = subprocess.Popen(  # another process writes the database
        [sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
         "print('open', flush=True); sys.stdin.read()", str(db)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        _refused(_search(*BASE, db=db), "is in use by process", str(holder.pid))
    finally:
        holder.kill()
        holder.wait(timeout=30)


@pytest.mark.usefixtures("nothing_starts")
def test_llm_settings_are_checked_before_anything_starts(tmp_path, db, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    llm = (*BASE, "--agent", "llm")
    _refused(_search(*llm, "--model", "gpt-4o", db=db), "no API key", "OPENAI_API_KEY")
    local = (*llm, "--model", "my-coder", "--base-url", "http://127.0.0.1:9/v1")
    _refused(_search(*local, "--max-usd", "1", db=db), "no price is known",
             '--prices FILE (JSON {"my-coder": [usd_per_mtok_in, usd_per_mtok_out]})')  # fmt: skip
    broken = tmp_path / "prices.json"
    broken.write_text('{"my-coder": "cheap"}')
    _refused(_search(*local, "--prices", str(broken), db=db), "USD per million")


def test_the_provider_follows_the_model_and_the_llm_options_reach_it(tmp_path, db, monkeypatch):
    plans = []
    monkeypatch.setattr("kforge_search.cli.execute.execute", lambda plan, **kw: plans.append(plan))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"my-coder": [0.5, 1.5]}))
    args = (*BASE, "--agent", "llm", "--llm-timeout", "7", "--llm-retries", "0")
    out = _search(*args, "--model", "claude-sonnet-4-5", "--base-url", "http://127.0.0.1:9",
                  "--max-output-tokens", "20000", "--max-usd", "2", db=db)  # fmt: skip
    assert out.exit_code == 0, out.output
    config = plans[-1].agents[0]._config
    assert (config.provider, config.base_url) == ("anthropic", "http://127.0.0.1:9")
    assert (config.timeout_s, config.max_retries, config.max_tokens) == (7.0, 0, 20000)
    out = _search(*args, "--model", "my-coder", "--base-url", "http://127.0.0.1:9/v1",
                  "--prices", str(prices), "--max-usd", "2", db=db)  # fmt: skip
    assert out.exit_code == 0, out.output
    config = plans[-1].agents[0]._config
    assert config.provider == "compatible" and config.prices_file == str(prices)
    assert plans[-1].budget.money_usd == 2 and "warning" not in out.output
    out = _search(*args, "--model", "my-coder", "--base-url", "http://127.0.0.1:9/v1", db=db)
    assert out.exit_code == 0 and "no price is known for the model my-coder" in out.output
    assert plans[-1].config.generations == 3  # the default, when --generations is not given
