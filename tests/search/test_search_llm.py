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
from tests.llm.server import Say, ScriptedLLM, Status

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


ANALYSIS = Say(
    "Looking at the digest, the chain is one launch and memory-bound.\n\n```json\n"
    '{"bottleneck": "memory", "summary": "One pass over the data at low bandwidth.", '
    '"suggestions": [{"title": "Smaller blocks for more programs", "detail": "BLOCK 1024 '
    'keeps more programs in flight", "expected_gain": "up to 1.3x"}]}\n```',
    80,
    40,
)


def test_llm_search_fixes_a_build_error_from_its_log_then_optimizes(tmp_path):
    db = tmp_path / "k.duckdb"
    script = [_reply(BROKEN, "Here is a fused kernel."), _reply(GOOD, "Fixed the import.")]
    script += [ANALYSIS, _reply(FASTER, "Tuned."), _reply(FASTER, "The same again.")]
    with ScriptedLLM(*script) as server:
        out = _search(server, db, "--generations", "3", "--max-candidates", "3")
    assert out.exit_code == 0, out.output
    assert len(server.seen) == 4
    assert "functional pass" in _prompt(server, 0)
    second = _prompt(server, 1)
    assert "Your previous attempt" in second and "No module named 'triton.languag'" in second
    # the analyst reads the verified kernel's profile before the optimization pass
    analyst = _prompt(server, 2)
    assert "Analyze this verified cpu-triton kernel" in analyst
    assert "kernel launches per call" in analyst and "_chain_kernel" in analyst
    assert "Bottleneck:" in analyst  # the rules' verdict, for the model to correct
    fourth = _prompt(server, 3)
    assert "optimization pass" in fourth and "The current best" in fourth and "p50" in fourth
    assert "The performance analyst's recommendations" in fourth
    assert "Bottleneck: memory. One pass over the data" in fourth
    assert "Smaller blocks for more programs (expected: up to 1.3x)" in fourth
    with Reader.open(db) as reader:
        statuses = reader.query(
            "SELECT e.status FROM evaluations e JOIN runs r ON r.id = e.run_id "
            "WHERE r.kind = 'search' ORDER BY e.created_at"
        ).rows
        calls = reader.query("SELECT role, model, tokens_in, tokens_out FROM llm_calls").rows
        agents = reader.query("SELECT DISTINCT agent, model FROM candidates").rows
        recs = reader.query(
            "SELECT r.agent, r.model, r.analysis, r.suggestions, c.source FROM recommendations r "
            "JOIN candidates c ON c.id = r.candidate_id"
        ).rows
        tools = reader.query("SELECT DISTINCT tool FROM profiles").rows
    assert [s for (s,) in statuses][:2] == ["COMPILE_ERROR", "OK"]
    writer = ("writer", "scripted-coder", 100, 50)
    assert sorted(calls) == sorted([writer, writer, ("analyst", "scripted-coder", 80, 40), writer])
    assert list(agents) == [("llm", "scripted-coder")]
    assert len(recs) == 1
    agent, model, analysis, suggestions, source = recs[0]
    assert (agent, model) == ("llm", "scripted-coder") and source == GOOD
    assert analysis.startswith("memory: One pass")
    assert "up to 1.3x" in suggestions
    assert ("launch-timer",) in list(tools)


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


def test_a_search_whose_every_llm_call_fails_says_why_and_exits_non_zero(tmp_path):
    db = tmp_path / "k.duckdb"
    with ScriptedLLM(Status(503), Status(503)) as server:
        out = _search(server, db, "--generations", "2", "--llm-retries", "0")
    said = " ".join(out.output.split())
    assert out.exit_code == 1, out.output
    assert "no draft: LLM writer call http_error 503 after 1 attempt: server error 503" in said
    assert "Error: every LLM call of the search failed (2); the last: writer call" in said
    assert len(server.seen) == 2  # one call per generation: the SDK retried nothing
    with Reader.open(db) as reader:
        calls = reader.query(
            "SELECT status, http_status, attempts, lineage_id, error, latency_s FROM llm_calls"
        ).rows
        ((run_id, status),) = reader.query("SELECT id, status FROM runs").rows
    assert status == "failed" and len(calls) == 2
    for code, http, attempts, lineage, error, latency in calls:
        assert (code, http, attempts) == ("http_error", 503, 1) and latency > 0
        assert lineage.endswith("@cpu-triton#0") and "server error 503" in error
    shown = CliRunner().invoke(app, ["db", "show", run_id[:8], "--db", str(db)])
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.split())
    assert f"run {run_id}" in text and "failed" in text and "http_error" in text
    assert "every LLM call failed; the last: server error 503" in text
