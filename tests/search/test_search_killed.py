"""`kforge search` killed with SIGKILL leaves no process behind: not Ray's (GCS, raylet, the
dashboard and runtime-env agents, which ignore SIGTERM), not the evaluators' children. Its
watcher (procs/watch.py) ends them. Looked for afterwards among every process below the CLI
just before the kill (pid and start time) and by a marker in their environment."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

from kforge_search.procs.tree import command_line, descendants, marked, processes
from tests.conftest import ROOT

MARK = "KFORGE_TEST_KILLED_SEARCH"
PROBLEM = "level2/01_gemm_bias_relu"


def test_a_search_killed_with_sigkill_leaves_no_process(tmp_path):
    token = uuid.uuid4().hex
    cmd = [sys.executable, "-m", "kforge_search", "search", PROBLEM, "--platform", "cpu-cpp"]
    cmd += ["--sizes", "ci", "--lineages", "1", "--generations", "8"]
    cmd += ["--db", str(tmp_path / "k.duckdb")]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        start_new_session=True,
        env={**os.environ, MARK: token, "PYTHONUNBUFFERED": "1"},
    )
    seen: dict[int, int] = {}
    try:
        assert proc.stdout is not None
        output = []
        for line in proc.stdout:  # gen 0 evaluated: Ray, the pool and its children are up
            output.append(line)
            if line.startswith("gen 0 "):
                break
        procs = processes()
        seen = {p: procs[p].start for p in descendants(proc.pid, procs)}
        names = " ".join(command_line(p) for p in seen)
        assert "raylet" in names and "kforge_search.procs.keeper" in names, "".join(output)
        proc.kill()  # SIGKILL: the CLI cannot clean up
        proc.wait()
        left = _left(seen, token, wait_s=20)
        assert left == [], f"{len(left)} of {len(seen)} processes still alive:\n" + "\n".join(left)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _left(seen: dict[int, int], token: str, wait_s: float) -> list[str]:
    deadline = time.monotonic() + wait_s
    while True:
        procs = processes()
        alive = {p for p, start in seen.items() if p in procs and procs[p].start == start}
        alive |= set(marked(MARK, token, procs))
        alive = {p for p in alive if procs.get(p) is not None and procs[p].state != "Z"}
        if not alive or time.monotonic() > deadline:
            return [f"{p}: {command_line(p)[:160]}" for p in sorted(alive)]
        time.sleep(0.2)
