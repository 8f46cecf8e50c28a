"""The timed runs are checked where the candidate cannot reach (evaluator/timed_check.py,
timed_runs.py, oracle.py): timing inputs from fresh OS randomness sent after the candidate is
loaded, whole outputs of timed runs chosen after they ran compared with a candidate-free
oracle's, and back-to-back calls timed by the parent's own clock."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator, Status, timed_check
from kforge_search.evaluator.result import TimingStats
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.conftest import EXAMPLES

CANDIDATES = Path(__file__).resolve().parent / "candidates"
CHAIN = "level1/10_elementwise_chain"
HONEST = EXAMPLES / "triton" / "elementwise_chain.py"

# attacks on the timed runs, with the reason they must be rejected for
FILES = {
    "30a_precomputed_timing_inputs.py": "timing:stale-output",
    "30b_work_on_fresh_buffers.py": "timing:wall-clock",
}


@pytest.fixture(scope="module")
def evaluator():
    made = Evaluator(EvalConfig(baselines=()))
    yield made
    made.close()


def _chain(evaluator: Evaluator, path: Path):
    problem = resolve_problem(CHAIN, size_set="ci")
    return evaluator.evaluate(path, problem, get_platform("cpu-triton"))


@pytest.mark.parametrize("name", sorted(FILES))
def test_attack_on_the_timed_runs_is_rejected(evaluator, name):
    result = _chain(evaluator, CANDIDATES / name)
    report = f"{result.status}: {result.message}"
    assert result.status is Status.REJECTED, report
    assert result.artifacts.reasons == (FILES[name],), report
    assert result.stage == "time", report


def test_timing_inputs_are_fresh_for_every_evaluation(evaluator, tmp_path):
    """A candidate that prints the first element of every input it sees: the verification
    trials' inputs are the same in two evaluations (fixed seeds), the timed runs' are not."""
    source = HONEST.read_text().replace(
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n",
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
        "        print(f'seen {float(x.flatten()[0]):.9g}', flush=True)\n",
    )
    assert "seen" in source, "the example changed: the print was not added"
    path = tmp_path / "candidate.py"
    path.write_text(source)
    seen = []
    for _ in range(2):
        result = _chain(evaluator, path)
        assert result.status is Status.OK, result.message
        seen.append(re.findall(r"seen (\S+)", result.artifacts.output_tail))
    first, second = (set(s) for s in seen)
    common = first & second
    assert len(common) >= 5, "the verification trials' inputs should repeat"
    assert len(first - common) >= 3 and len(second - common) >= 3, (first, second)


def test_a_dead_oracle_is_started_again(evaluator):
    """The reference's child stays as the oracle; when it has gone, the next evaluation starts
    a fresh one (and still checks the timed runs)."""
    assert _chain(evaluator, HONEST).status is Status.OK
    (oracle,) = evaluator.oracle_pids()
    os.kill(oracle, signal.SIGKILL)
    result = _chain(evaluator, HONEST)
    assert result.status is Status.OK, result.message
    (again,) = evaluator.oracle_pids()
    assert again != oracle
    evaluator.close_oracles()  # a bench's problem is done: its oracle's memory goes
    assert evaluator.oracle_pids() == [] and not _alive(again)
    assert _chain(evaluator, HONEST).status is Status.OK  # and one starts when asked


def _alive(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        time.sleep(0.05)
    return True


def _timing(p50: float, host: float = 0.0) -> TimingStats:
    return TimingStats("perf_counter", 50, p50, p50, p50, host)


def test_the_parent_clock_check_allows_launch_latency_but_not_a_forged_clock():
    # an honest launch-bound call: 0.01 ms on the device, 0.2 ms of host time per call
    assert timed_check.wall_problem(_timing(0.01), wall_ms=32 * 0.2 + 1.0, calls=32) is None
    # a claim of 0.01 ms for calls that take 5 ms each by the parent's clock
    found = timed_check.wall_problem(_timing(0.01), wall_ms=32 * 5.0, calls=32)
    assert found is not None and found[0] == "timing:wall-clock"
    # what the host saw counts as claimed too
    assert timed_check.wall_problem(_timing(0.01, host=5.0), wall_ms=32 * 5.0, calls=32) is None


def test_runs_are_chosen_from_os_randomness():
    picks = {tuple(timed_check.choose(50, 4)) for _ in range(20)}
    assert len(picks) > 1 and all(len(p) == 4 and list(p) == sorted(set(p)) for p in picks)
    assert timed_check.choose(2, 4) == [0, 1]
    assert timed_check.draw() != timed_check.draw()


def test_fewer_outputs_are_checked_where_they_are_large():
    assert timed_check.reveal_counts(4 * 2**20) == (4, 2)
    assert timed_check.reveal_counts(256 * 2**20) == (3, 1)
    assert timed_check.reveal_counts(2 * 2**30) == (1, 1)


@pytest.mark.parametrize("name", [HONEST.name, *sorted(FILES)])
def test_the_oracle_compares_the_chosen_runs_against_a_held_reference_too(name, monkeypatch):
    """EvalConfig.timed_check_in_oracle: the chosen timed runs go to the oracle (host copies
    here, CUDA IPC handles on a GPU) and it compares them, as against a streamed reference:
    the honest chain still passes, and each attack is caught for the same reason."""
    from kforge_search.evaluator.oracle import Oracle

    asked: list[str] = []
    for verb in ("compare_runs", "outputs"):
        real = getattr(Oracle, verb)
        monkeypatch.setattr(Oracle, verb, lambda self, *a, _r=real, _v=verb, **k: (
            asked.append(_v), _r(self, *a, **k))[1])  # fmt: skip
    path = HONEST if name == HONEST.name else CANDIDATES / name
    made = Evaluator(EvalConfig(baselines=(), timed_check_in_oracle=True))
    try:
        result = _chain(made, path)
    finally:
        made.close()
    report = f"{result.status}: {result.message}"
    if path == HONEST:
        assert result.status is Status.OK, report
    else:
        assert result.status is Status.REJECTED and result.artifacts.reasons == (FILES[name],)
    if result.artifacts.reasons != ("timing:wall-clock",):  # (caught before any run's check)
        assert asked and set(asked) == {"compare_runs"}, asked  # no oracle outputs in a file
