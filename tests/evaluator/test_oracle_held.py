"""A held reference's trials compared in its oracle (oracle_held.py), on the host here: the
same protocol as on a GPU, where the candidate's outputs come as CUDA IPC handles
(test_gpu.py covers those)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
import torch

from kforge_search.evaluator.channel import Channel
from kforge_search.evaluator.config import EvalConfig
from kforge_search.evaluator.oracle_compare import TrialSpec
from kforge_search.evaluator.oracle_held import HeldRoom, serve_held_trials
from kforge_search.evaluator.resident import Trials


def held_file(folder: Path, outputs: list[list[torch.Tensor]]) -> str:
    """The file the parent writes into an oracle's folder (Oracle.hold_trials), once."""
    from kforge_search.evaluator.oracle import Oracle

    oracle = Oracle.__new__(Oracle)  # its folder only: no process, no finalizer
    oracle.work, oracle.held, oracle.held_bytes = folder, "", 0
    exact = [[t.double() for t in trial] for trial in outputs]
    path = oracle.hold_trials(Trials(outputs, exact, [{} for _ in outputs]), 1)
    assert oracle.hold_trials(Trials([], None, []), 2) == path and oracle.held_bytes == 1
    return path


def candidate_file(folder: Path, pos: int, outputs: list[torch.Tensor]) -> str:
    path = folder / f"candidate-trial-{pos}"
    torch.save({"outputs": outputs, "buffers": {}}, path)
    return str(path)


def serve(spec: TrialSpec, kept: dict, paths: list[str], monkeypatch) -> list[dict]:
    """The oracle's answers to `trial PATH` for each of `paths`, then `end`."""
    said = "".join(f"trial {p}\n" for p in paths) + "end\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(said))
    read, write = os.pipe()
    channel = Channel(write)
    serve_held_trials("cpu", channel, spec, kept)
    del channel  # its file, closed: the pipe ends
    with os.fdopen(read) as pipe:
        return [json.loads(line) for line in pipe]


def test_the_oracle_reads_the_held_trials_once_and_compares_each_candidate_trial(
    tmp_path, monkeypatch
):
    gen = torch.Generator().manual_seed(0)
    reference = [[torch.randn(16, 8, generator=gen)] for _ in range(3)]
    path = held_file(tmp_path, reference)
    spec = TrialSpec("strict", True, [0, 1, 2], [], None, [[1.0]] * 3, 16 * 8 * 4, path)
    kept: dict = {}

    honest = [candidate_file(tmp_path, i, [t[0].clone()]) for i, t in enumerate(reference)]
    events = serve(spec, kept, honest, monkeypatch)
    assert [e["type"] for e in events] == ["compared"] * 3 + ["trials-done"]
    verdicts = [e["comparison"] for e in events[:3]]
    assert all(v["mismatch"] is None for v in verdicts), verdicts
    assert [v["correctness"]["trials_passed"] for v in verdicts] == [1, 1, 1], verdicts
    assert not Path(path).exists(), "the parent's file stays after the oracle read it"
    assert list(kept) == [path] and kept[path].device is None

    # the next candidate: the trials are the kept ones (the file is gone); its third is off
    wrong = reference[2][0].clone()
    wrong[3, 4] += 1.0
    outputs = [[reference[0][0].clone()], [reference[1][0].clone()], [wrong]]
    events = serve(spec, kept, [candidate_file(tmp_path, i, o) for i, o in enumerate(outputs)],
                   monkeypatch)  # fmt: skip
    verdicts = [e["comparison"] for e in events[:3]]
    assert [v["mismatch"] is None for v in verdicts] == [True, True, False], verdicts
    assert verdicts[2]["mismatch"]["indices"] == [[3, 4]], verdicts[2]
    assert not list(tmp_path.glob("candidate-trial-*")), "the candidate's files stay"


def test_a_stream_the_parent_ends_early_answers_only_what_it_was_asked(tmp_path, monkeypatch):
    reference = [[torch.ones(4)] for _ in range(3)]
    path = held_file(tmp_path, reference)
    spec = TrialSpec("strict", True, [0, 1, 2], [], None, [[1.0]] * 3, 16, path)
    events = serve(spec, {}, [candidate_file(tmp_path, 0, [torch.ones(4)])], monkeypatch)
    assert [e["type"] for e in events] == ["compared", "trials-done"]


@pytest.mark.parametrize(("value", "on"), [("", False), ("0", False), ("1", True)])
def test_trials_go_to_the_oracle_only_where_the_environment_says_1(monkeypatch, value, on):
    monkeypatch.setenv("KFORGE_TRIALS_IN_ORACLE", value)
    assert EvalConfig().trials_in_oracle is on


class _Kept:
    """An oracle as Evaluator._trim_held sees it: the held trials' bytes it keeps."""

    def __init__(self, held_bytes: int):
        self.held_bytes, self.alive = held_bytes, True

    def close(self) -> None:
        self.alive = False


def test_oracles_keep_two_references_trials_and_the_least_recently_asked_go_first():
    from collections import OrderedDict

    from kforge_search.evaluator import Evaluator

    made = Evaluator(EvalConfig(baselines=()))
    try:
        made._held = HeldRoom(100)
        old, problem, unseen = _Kept(90), _Kept(100), _Kept(100)
        made._oracles = OrderedDict(old=old, problem=problem, unseen=unseen)
        made._trim_held(unseen)
        assert [old.alive, problem.alive, unseen.alive] == [False, True, True]
        made._trim_held(problem)  # a problem's and its unseen sizes' stay together
        assert problem.alive and unseen.alive
    finally:
        made._oracles = OrderedDict()
        made.close()
