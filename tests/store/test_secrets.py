"""Nothing that looks like an API key is stored, exported, printed or logged."""

from __future__ import annotations

import json
import logging
from dataclasses import replace

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from kforge_search.cli.db import record_eval
from kforge_search.evaluator import EvalConfig
from kforge_search.evaluator.result import Artifacts
from kforge_search.problem import resolve_problem
from kforge_search.store.reader import Reader
from kforge_search.store.records import (
    LlmCallRecord,
    ProfileRecord,
    RecommendationRecord,
    RunRecord,
)
from kforge_search.store.schema import TABLES
from kforge_search.store.secrets import MASK, Redactor
from kforge_search.store.writer import WriteError, Writer
from tests.store.factories import candidate, cli_app, eval_result, problem_record

OPENAI = "sk-proj-" + "Fake0penAIkey" * 4
ANTHROPIC = "sk-ant-api03-" + "FakeAnthr0picKey" * 5
ODD = "zq7Xv9-odd-shaped-credential-4411"  # only its variable's name gives it away
UNLISTED = "sk-ant-api03-" + "NotInTheEnvironment9" * 3  # in a prompt, not in the env
AWS = "AKIA" + "FAKE0123456789AB"
KEYS = (OPENAI, ANTHROPIC, ODD, UNLISTED, AWS)
CONTROL = "CONTROL-marker-that-is-stored-0042"


@pytest.fixture
def env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC)
    monkeypatch.setenv("ACME_SERVICE_TOKEN", ODD)


def _prompt(note: str) -> str:
    return (
        f"{note} {CONTROL}\nexport OPENAI_API_KEY={OPENAI}\nclient = Anthropic("
        f'api_key="{ANTHROPIC}")\nAuthorization: Bearer {ODD}\n{UNLISTED} {AWS}\n'
    )


def test_redactor_shapes_and_literals():
    redactor = Redactor.from_environ({"ACME_SERVICE_TOKEN": ODD, "HOME": "/root/x1234567"})
    text = redactor.text(_prompt("ctx"))
    assert not any(k in text for k in KEYS) and CONTROL in text and MASK in text
    assert "/root/x1234567" not in redactor.literals  # paths are not secrets
    source = "num_tokens = batch_size * seq_len\nkey = tl.load(ptr + offs)\n"
    assert redactor.text(source) == source  # ordinary kernel code is left alone
    assert redactor.blob(OPENAI.encode() + b"\xff") == MASK.encode() + b"\xff"


def _fill(db, caplog) -> None:
    p = problem_record("relu", "torch.relu(self.linear(x))")
    c = candidate(p, "cpu-cpp", _prompt("candidate"))
    config = json.dumps({"api_key": ANTHROPIC, "prompt": _prompt("config")})
    with caplog.at_level(logging.DEBUG), Writer(db) as writer:
        writer.write([
            p, c, RunRecord("search", config, "0.1.0"),
            ProfileRecord(c.id, "perf", json.dumps({"env": OPENAI}), _prompt("raw").encode()),
            RecommendationRecord(c.id, _prompt("analysis"), json.dumps([_prompt("fix")])),
            LlmCallRecord("writer", f"model-with-{ODD}", "ok", run_id="r"),
        ])  # fmt: skip
        with pytest.raises(WriteError) as failed:  # a failing batch: its error names no key
            writer.write([RunRecord("search", "{" + _prompt("broken"), "0.1.0")])
        assert not any(k in str(failed.value) for k in KEYS)
    problem = resolve_problem("level1/10_elementwise_chain", size_set="ci")
    source = f'"""{_prompt("evaluated")}"""\nclass ModelNew:\n    pass\n'
    file = db.parent / "cand.py"
    file.write_text(source)
    result = replace(
        eval_result(problem, source),
        message=_prompt("message"),
        artifacts=Artifacts(compile_log=_prompt("log"), traceback=_prompt("tb")),
    )
    record_eval(db, result, file, problem, EvalConfig())


def test_keys_are_absent_from_the_database_exports_and_output(env, tmp_path, caplog):
    db = tmp_path / "k.duckdb"
    _fill(db, caplog)
    runner, app = CliRunner(), cli_app()

    # Every value, read back through SQL (covers compressed storage too).
    dump = ""
    for table in TABLES:
        out = runner.invoke(app, ["db", "query", f"SELECT * FROM {table}", "--format", "json",
                                  "--db", str(db)])  # fmt: skip
        assert out.exit_code == 0, out.output
        dump += out.output
    assert CONTROL in dump and MASK in dump
    assert not any(k in dump for k in KEYS)

    # The file's bytes (the control string shows the check can see stored text).
    raw = b"".join(f.read_bytes() for f in tmp_path.glob("k.duckdb*"))
    assert CONTROL.encode() in raw
    assert not any(k.encode() in raw for k in KEYS)

    # Exports: the files, and their values read back.
    exported = runner.invoke(app, ["db", "export", str(tmp_path / "out"), "--db", str(db)])
    assert exported.exit_code == 0, exported.output
    for file in (tmp_path / "out").iterdir():
        content = file.read_bytes()
        if file.suffix == ".parquet":
            content += str(pq.read_table(file).to_pylist()).encode()
        assert not any(k.encode() in content for k in KEYS), file.name

    # What the CLI prints and what was logged.
    with Reader.open(db) as reader:
        ids = [cid for (cid,) in reader.query("SELECT id FROM candidates").rows]
    for cid in ids:
        shown = "".join(runner.invoke(app, ["db", "show", cid, "--db", str(db)]).output.split())
        assert CONTROL in shown and not any(k in shown for k in KEYS)  # even if wrapped
    assert caplog.text and not any(k in caplog.text for k in KEYS)
