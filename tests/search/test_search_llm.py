"""`kforge search --agent llm` end to end on CPU: the real openai SDK against a scripted local
server, a real local Ray cluster, real evaluations on cpu-triton, a real DuckDB file. The
scripted model first writes code that does not build, gets the error in its next prompt,
passes, and is then asked to optimize; a token budget stops a search cleanly, with why."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from kforge_search.cli.app import app
from kforge_search.store.reader import Reader
from tests.conftest import EXAMPLES
from tests.llm.server import Say, ScriptedLLM

pytestmark = [pytest.mark.usefixtures("ray_cluster"), pytest.mark.llm]

GOOD = (EXAMPLES / "triton" / "elementwise_chain.py").read_text()
BROKEN = GOOD.replace("import triton.language as tl", "import triton.languag as tl")
FASTER = GOOD.replace("BLOCK = 2048", "BLOCK = 1024")


def _reply(code: str, words: str) -> Say:
    return Say(f"{words}\n\n```python\n{code}```\n\nThat should do it.", 100, 50)


def _search(server: ScriptedLLM, db, *extra: str):
    args = ["search", "level1/10_elementwise_chain", "--platform", "cpu-triton", "--sizes", "ci"]
    args += ["--agent", "llm", "--model", "scripted-coder", "--base-url", f"{server.url}/v1"]
    args += ["--lineages", "1", "--db", str(db), *extra]
    return CliRunner().invoke(app, args)


def _prompt(server: ScriptedLLM, i: int) -> str:
    return "\n".join(m["content"] for m in server.seen[i].body["messages"])


def test_llm_search_fixes_a_build_error_from_its_log_then_optimizes(tmp_path):
    db = tmp_path / "k.duckdb"
    script = [_reply(BROKEN, "Here is a fused kernel."), _reply(GOOD, "Fixed the import.")]
    script += [_reply(FASTER, "Tuned."), _reply(FASTER, "The same again.")]
    with ScriptedLLM(*script) as server:
        out = _search(server, db, "--generations", "3", "--max-candidates", "3")
    assert out.exit_code == 0, out.output
    assert len(server.seen) == 3
    assert "functional pass" in _prompt(server, 0)
    second = _prompt(server, 1)
    assert "Your previous attempt" in second and "No module named 'triton.languag'" in second
    third = _prompt(server, 2)
    assert "optimization pass" in third and "The current best" in third and "p50" in third
    with Reader.open(db) as reader:
        statuses = reader.query(
            "SELECT e.status FROM evaluations e JOIN runs r ON r.id = e.run_id "
            "WHERE r.kind = 'search' ORDER BY e.created_at"
        ).rows
        calls = reader.query("SELECT role, model, tokens_in, tokens_out FROM llm_calls").rows
        agents = reader.query("SELECT DISTINCT agent, model FROM candidates").rows
    assert [s for (s,) in statuses][:2] == ["COMPILE_ERROR", "OK"]
    assert list(calls) == [("writer", "scripted-coder", 100, 50)] * 3
    assert list(agents) == [("llm", "scripted-coder")]


def test_a_token_budget_stops_the_search_cleanly_and_says_why(tmp_path):
    db = tmp_path / "k.duckdb"
    with ScriptedLLM(*[_reply(GOOD, "Done.")] * 6) as server:
        out = _search(server, db, "--generations", "5", "--max-llm-tokens", "200")
    assert out.exit_code == 0, out.output
    used = re.search(r"budget exhausted: llm_tokens used (\d+) of 200", out.output)
    assert used, out.output
    # checked before each generation: the generation that crossed it was the last, and the
    # budget counted every call made (150 tokens each)
    assert int(used.group(1)) == 150 * len(server.seen) >= 200
    assert len(server.seen) < 6
    with Reader.open(db) as reader:
        (status,) = reader.query("SELECT status FROM runs WHERE kind = 'search'").rows[0]
    assert status == "finished"
