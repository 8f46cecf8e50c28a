"""`kforge search` on the session's real local Ray cluster: two problems (cpu-triton; cpu-cpp
for the Ctrl-C run), every
evaluation recorded once by the writer actor, with lineages and parent links, and the
winners measured again under a run of their own."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import traceback

import pytest
from typer.testing import CliRunner

from kforge_search.cli.app import app
from kforge_search.cli.execute import _terminate_as_interrupt
from kforge_search.store.connection import StoreLockedError
from kforge_search.store.queries import best_kernels
from kforge_search.store.reader import Reader
from kforge_search.store.runs import list_runs

pytestmark = pytest.mark.usefixtures("ray_cluster")

PROBLEMS = ["level2/01_gemm_bias_relu", "level2/05_gemm_scale_clamp_min"]
# the recorded search's platform: Triton's interpreter builds nothing (on cpu-cpp its ~8
# distinct kernels were ~8 C++ builds, 282 s of a 17-minute CI run)
RECORDED = "cpu-triton"


def _run_id(output: str) -> str:
    (line,) = [x for x in output.splitlines() if x.startswith("run ")]
    return line.split()[1].rstrip(":")


def test_search_records_every_evaluation_once_with_parent_links_and_resumes(tmp_path):
    db = tmp_path / "k.duckdb"
    args = ["search", *PROBLEMS, "--platform", RECORDED, "--sizes", "ci"]
    args += ["--lineages", "2", "--generations", "1", "--db", str(db)]
    args.append("--profile")  # builtin lineages: profiles and rule-based recommendations stored
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "(known)" in first.output and "generations" in first.output
    assert "winners, measured again" in first.output and first.output.count("confirmed") >= 2
    # --resume: the same search, its stored evaluations replayed, one generation more
    again = ["search", "--resume", _run_id(first.output)[:12], "--generations", "2"]
    again.append("--lineage-actors")  # the lineages (and their agents) in Ray actors this time
    second = CliRunner().invoke(app, [*again, "--db", str(db)])
    assert second.exit_code == 0, second.output
    assert "evaluations replayed from the database" in second.output
    assert "gen 1 " in second.output
    # one generation: a lineage's second step only where its first was another's result
    # (free: engine.Search.spent)
    lines = [ln.split() for ln in first.output.splitlines() if ln.startswith("gen ")]
    free = {words[2] for words in lines if words[1] == "0" and "(known)" in words}
    assert all(words[2] in free for words in lines if words[1] != "0"), first.output
    reader = Reader.open(db)
    try:
        runs = reader.query("SELECT kind, status, config FROM runs ORDER BY started_at").rows
        rows = reader.query(
            "SELECT c.id, c.lineage_id, c.generation, c.pass_kind, c.parent_ids, e.status, "
            "e.run_id FROM candidates c JOIN evaluations e ON e.candidate_id = c.id "
            "JOIN runs r ON r.id = e.run_id WHERE r.kind = 'search'"
        ).dicts()
        advised = reader.query(
            "SELECT DISTINCT r.candidate_id, r.agent, p.tool FROM recommendations r "
            "JOIN profiles p ON p.candidate_id = r.candidate_id"
        ).rows
        remeasured = reader.query(
            "SELECT e.candidate_id, e.status FROM evaluations e "
            "JOIN runs r ON r.id = e.run_id WHERE r.kind = 'remeasure'"
        ).rows
    finally:
        reader.close()
    assert [(k, st) for k, st, _ in runs] == [("search", "finished"), ("remeasure", "finished")] * 2
    assert json.loads(runs[2][2])["resumed_from"] == _run_id(first.output)
    pool = json.loads(runs[0][2])["evaluators"][RECORDED]  # the pool and where it times
    assert (pool["actors"], pool["per_gpu"]) == (1, 1)
    assert [lane.rsplit("/", 1)[1] for lane in pool["lanes"]] == ["cpu"]
    ids = [r["id"] for r in rows]
    # no kernel evaluated twice, across both runs: a kernel per problem and generation at
    # least (a problem's two lineages draw the same seed: the second is known)
    assert len(ids) == len(set(ids)) >= 4
    # every evaluation judged its candidate: a tuning step may fail the policy (bf16x3, the
    # second draft under strict, fails its wide-range trial on some GEMMs) and is recorded
    # INCORRECT; an infrastructure failure would be no verdict
    assert all(r["status"] in ("OK", "INCORRECT") for r in rows), [r["status"] for r in rows]
    resumed = [r for r in rows if r["run_id"] != rows[0]["run_id"]]
    assert resumed and all(r["generation"] >= 1 for r in resumed)  # only the new generation
    roots = [r for r in rows if not r["parent_ids"]]
    children = [r for r in rows if r["parent_ids"]]
    assert len(roots) == 2 and all(r["pass_kind"] == "functional" for r in roots)
    assert all(r["status"] == "OK" for r in roots)  # the seeds verify
    assert children and all(r["pass_kind"] == "optimization" for r in children)
    assert all(set(r["parent_ids"]) <= set(ids) for r in children)
    assert {r["lineage_id"].split("@")[0] for r in rows} == set(PROBLEMS)
    # --profile: every profiled builtin kernel got the rule-based analysis (no LLM here)
    assert advised and {(agent, tool) for _, agent, tool in advised} == {("rules", "launch-timer")}
    assert {cid for cid, _, _ in advised} <= set(ids)
    # each problem's winner measured a second time, stored beside the first measurement
    assert len(remeasured) == 4 and all(status == "OK" for _, status in remeasured)
    assert {cid for cid, _ in remeasured} <= set(ids)
    # kforge seed: a new search of problem 01 starts from the best kernel stored for it
    with Reader.open(db) as reader:  # the store's own ranking of verified kernels
        (hit,) = best_kernels(reader, PROBLEMS[0], RECORDED, limit=1)
    best = next(r for r in rows if r["id"] == hit.candidate_id)
    seed = ["seed", PROBLEMS[0], "--from", RECORDED, "--to", RECORDED, "--sizes", "ci"]
    seed += ["--lineages", "1", "--generations", "2", "--db", str(db)]
    third = CliRunner().invoke(app, seed)
    assert third.exit_code == 0, third.output + "".join(
        traceback.format_exception(third.exception) if third.exception else ()
    )
    assert "as first candidates" in third.output and best["id"] in third.output
    with Reader.open(db) as reader:
        seeded = reader.query(
            "SELECT c.id, e.status, c.generation, c.parent_ids FROM evaluations e "
            "JOIN candidates c ON c.id = e.candidate_id JOIN runs r ON r.id = e.run_id "
            f"WHERE json_extract_string(r.config, '$.seeded_from') = '{RECORDED}' "
            "ORDER BY e.created_at"
        ).rows
    assert seeded[0][:2] == (best["id"], "OK")  # evaluated again, on the target
    # the builtin agent can tune the seeded kernel: its genome was read back from the source,
    # and the lineage went on in optimization passes. (Candidate rows keep the parents of
    # their first recording, so the seed run's own parent links cannot be read from them.)
    assert "builtin genome read back: block_m=" in third.output
    assert len(seeded) >= 2 and "(optimization)" in third.output


def test_resume_of_an_unknown_run_says_what_to_give(tmp_path):
    db = tmp_path / "k.duckdb"
    out = CliRunner().invoke(app, ["db", "migrate", "--db", str(db)])
    assert out.exit_code == 0, out.output
    out = CliRunner().invoke(app, ["search", "--resume", "nosuchrun", "--db", str(db)])
    assert out.exit_code == 2 and "no run matching 'nosuchrun'" in out.output


def test_ctrl_c_stops_cleanly_and_resume_continues(tmp_path):
    """A real `kforge search` process gets Ctrl-C (SIGINT to its process group, as a terminal
    sends it) after its first evaluations: it records what was evaluated, marks the run
    interrupted and exits with 130; --resume then replays those and goes on."""
    db = tmp_path / "k.duckdb"
    cmd = [sys.executable, "-m", "kforge_search", "search", *PROBLEMS, "--platform", "cpu-cpp"]
    cmd += ["--sizes", "ci", "--lineages", "1", "--generations", "6", "--db", str(db)]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("gen 1 "):
                os.killpg(proc.pid, signal.SIGINT)
                break
        output = "".join(seen) + proc.stdout.read()
        code = proc.wait(timeout=180)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert code == 130, output
    assert "interrupted (Ctrl-C or SIGTERM)" in output and "gen 5 " not in output
    with Reader.open(db) as reader:
        runs = reader.query("SELECT id, status FROM runs").rows
        evaluated = reader.query("SELECT count(*) FROM evaluations").rows[0][0]
    assert [status for _, status in runs] == ["interrupted"] and evaluated >= 3
    again = ["search", "--resume", runs[0][0], "--generations", "2", "--db", str(db)]
    second = CliRunner().invoke(app, again)
    assert second.exit_code == 0, second.output
    assert f"{evaluated} evaluations replayed from the database" in second.output


def test_sigkill_loses_no_printed_evaluation_and_the_run_resumes(tmp_path):
    """`kill -9` of a real `kforge search` after its first evaluations were printed: the run
    row and every printed evaluation are in the file, the run reads as interrupted (its
    driver is gone), and --resume replays them and goes on."""
    db = tmp_path / "k.duckdb"
    cmd = [sys.executable, "-m", "kforge_search", "search", PROBLEMS[0], "--platform", RECORDED]
    cmd += ["--sizes", "ci", "--lineages", "2", "--generations", "6", "--db", str(db)]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "300"},
    )
    try:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("gen 1 "):  # a step of the second generation was printed
                os.kill(proc.pid, signal.SIGKILL)  # the driver alone, as `kill -9 PID`
                break
        proc.wait(timeout=60)
        printed = int(re.findall(r"\((\d+) evaluated", "".join(seen))[-1])
        deadline = time.monotonic() + 120
        while True:  # the cluster ends the dead driver's writer actor: the file is free
            try:
                reader = Reader.open(db)
                break
            except StoreLockedError:
                assert time.monotonic() < deadline, "the killed search's writer kept the file"
                time.sleep(0.5)
        with reader:
            runs = reader.query("SELECT id, status, pid FROM runs").rows
            stored = reader.query("SELECT count(*) FROM evaluations").rows[0][0]
            first = reader.query(  # the evaluations of generation 0
                "SELECT count(*) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id "
                "WHERE c.generation = 0"
            ).rows[0][0]
            listed = [(r.id, r.state) for r in list_runs(reader)]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    ((run_id, status, pid),) = runs
    assert status == "running" and pid == proc.pid  # the driver had no time to say more
    assert listed == [(run_id, "interrupted")]  # ... but its process is gone
    assert stored >= printed >= 2, "".join(seen)
    shown = CliRunner().invoke(app, ["db", "runs", "--db", str(db), "--format", "json"])
    assert json.loads(shown.stdout)[0]["state"] == "interrupted"
    again = ["search", "--resume", run_id[:10], "--generations", "1", "--db", str(db)]
    second = CliRunner().invoke(app, again)  # generation 0 again: all of it replayed (a
    # lineage whose step 0 was the other's seed goes on to a step 1: engine.Search.spent)
    assert second.exit_code == 0, second.output
    assert f"marked interrupted (their driver had died): {run_id}" in second.output
    (replayed,) = re.findall(r"(\d+) evaluations replayed from the database", second.output)
    assert first <= int(replayed) <= stored, second.output
    with Reader.open(db) as reader:
        statuses = dict(reader.query("SELECT id, status FROM runs WHERE kind = 'search'").rows)
    assert statuses[run_id] == "interrupted" and list(statuses.values()).count("finished") == 1


def test_sigterm_stops_a_search_like_ctrl_c():
    before = signal.getsignal(signal.SIGTERM)  # ray.init's own, in this session
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"), _terminate_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises before this ends
    assert signal.getsignal(signal.SIGTERM) is before  # put back afterwards


def test_a_wall_clock_budget_stops_the_search_between_generations(tmp_path):
    args = ["search", PROBLEMS[0], "--platform", "cpu-cpp", "--sizes", "ci", "--lineages", "1"]
    args += ["--generations", "20", "--max-minutes", "0.001", "--db", str(tmp_path / "k.db")]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    assert "gen 0 " in out.output and "gen 1 " not in out.output
    assert "budget exhausted: wall_clock_s used" in " ".join(out.output.split())
    bad = CliRunner().invoke(app, [*args[:-2], "--max-minutes", "-1", "--db", args[-1]])
    assert bad.exit_code != 0 and "--max-minutes -1: needs > 0" in " ".join(bad.output.split())


BROKEN_REFERENCE = '''"""A reference that raises where it runs."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("this reference is broken on purpose")


batch_size = 4

KFORGE_SIZES = {"ci": {"batch_size": 4}}


def get_inputs():
    return [torch.randn(batch_size, 8)]


def get_init_inputs():
    return []
'''


def test_a_problem_whose_reference_fails_is_recorded_and_the_search_goes_on(tmp_path):
    broken = tmp_path / "broken_reference.py"
    broken.write_text(BROKEN_REFERENCE)
    db = tmp_path / "k.duckdb"
    args = ["search", PROBLEMS[0], str(broken), "--platform", "cpu-triton", "--sizes", "ci"]
    args += ["--lineages", "1", "--generations", "1", "--db", str(db)]
    out = CliRunner().invoke(app, [*args, "--format", "json"])
    assert out.exit_code == 0, out.output
    assert "not searched: the reference cannot run" in out.stderr
    searched, skipped = json.loads(out.stdout)  # one object per (problem, platform)
    assert searched["problem"] == PROBLEMS[0] and searched["verified"] >= 1
    assert searched["again"] == "confirmed" and searched["not_searched"] is None
    assert skipped["problem"] == "broken_reference" and skipped["evaluated"] is None
    assert "broken on purpose" in skipped["not_searched"]
    with Reader.open(db) as reader:
        (config,) = reader.query("SELECT config FROM runs WHERE kind = 'search'").rows[0]
        judged = reader.query(
            "SELECT DISTINCT p.name FROM evaluations e JOIN problems p ON p.id = e.problem_id"
        ).rows
    (recorded,) = json.loads(config)["not_searched"]
    assert recorded["problem"] == "broken_reference" and recorded["platform"] == "cpu-triton"
    assert "broken on purpose" in recorded["reason"]
    assert judged == ((PROBLEMS[0],),)  # the other problem was searched
    alone = CliRunner().invoke(app, ["search", *args[2:]])  # the broken problem alone
    assert alone.exit_code == 1 and "no problem could be searched" in alone.output
    with Reader.open(db) as reader:
        states = reader.query("SELECT status FROM runs WHERE kind = 'search' ORDER BY started_at")
    assert [s for (s,) in states.rows] == ["finished", "failed"]
