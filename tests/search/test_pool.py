"""The evaluator pool on a real local Ray cluster: results, and one retry on actor death."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator

import pytest
import ray

from kforge_search.actors.pool import (
    REFERENCE_STAGE,
    EvalRequest,
    EvaluatorPool,
    pick_work,
)
from kforge_search.evaluator import EvalConfig, Status
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.conftest import BROKEN, EXAMPLES
from tests.search.conftest import alive, worker_pids

pytestmark = pytest.mark.usefixtures("ray_cluster")

HONEST = (EXAMPLES / "triton" / "elementwise_chain.py").read_text()
WRONG = (BROKEN / "triton" / "wrong_values.py").read_text()
HANG = (BROKEN / "triton" / "python_hang.py").read_text()  # forward never returns
# small sizes, no baselines or unseen sizes, and a short verify limit so a hang ends soon
CONFIG = EvalConfig(baselines=(), check_unseen=False, verify_timeout_s=5.0)


@pytest.fixture()
def pool() -> Iterator[EvaluatorPool]:
    """One CPU actor; shut down (its actor killed) after each test."""
    with EvaluatorPool("cpu-triton", 1, CONFIG) as pool:
        pool.wait_ready()
        yield pool


@pytest.fixture(scope="module")
def problem():
    return resolve_problem("level1/10_elementwise_chain", size_set="ci")


def _request(key: str, source: str, problem) -> EvalRequest:
    return EvalRequest(key, source, problem)


def _kill_when_running(pool: EvaluatorPool, key: str, before: set[int]) -> int:
    """Wait until the candidate's process runs (a new one), then kill its actor."""
    deadline = time.monotonic() + 60
    while not (new := worker_pids() - before):
        assert time.monotonic() < deadline, "the candidate never started"
        time.sleep(0.1)
    ray.kill(pool.running()[key])
    return new.pop()


def _gone(pid: int, within_s: float = 15.0) -> bool:
    deadline = time.monotonic() + within_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not alive(pid)


def test_pool_evaluates_honest_and_broken_candidates(pool, problem):
    assert pool.options["num_cpus"] == 1.0 and pool.options["num_gpus"] == 0
    requests = [_request("honest", HONEST, problem), _request("wrong", WRONG, problem)]
    outcomes = {o.request.key: o for o in pool.map(requests)}
    assert outcomes["honest"].result.status is Status.OK, outcomes["honest"].result.message
    assert outcomes["honest"].result.platform == "cpu-triton"
    assert outcomes["wrong"].result.status is Status.INCORRECT
    assert all(o.attempts == 1 for o in outcomes.values())
    assert pool.pending == 0 and pool.idle == 1
    pool.submit(_request("dup", HANG, problem))  # hangs until the pool is shut down
    with pytest.raises(ValueError, match="already pending"):
        pool.submit(_request("dup", HANG, problem))


def test_an_actor_killed_mid_candidate_is_replaced_and_the_candidate_retried(pool, problem):
    pool.submit(_request("hang", HANG, problem))
    killed = _kill_when_running(pool, "hang", set())
    outcomes = pool.poll(timeout_s=120)
    assert [o.request.key for o in outcomes] == ["hang"]
    outcome = outcomes[0]
    assert outcome.attempts == 2 and pool.retries == 1 and pool.replaced == 1
    # the retry ran to its real verdict: the evaluator's own time limit
    assert outcome.result.status is Status.TIMEOUT and outcome.result.stage == "verify"
    assert _gone(killed), "the killed actor's candidate process was left running"


def test_a_second_death_is_an_infra_error_and_the_pool_goes_on(pool, problem):
    pool.submit(_request("hang", HANG, problem))
    first = _kill_when_running(pool, "hang", set())
    while pool.retries == 0:  # poll sees the death and sends the candidate again
        assert pool.poll(timeout_s=1) == []
    second = _kill_when_running(pool, "hang", {first})
    [outcome] = pool.poll(timeout_s=60)
    assert outcome.attempts == 2 and pool.replaced == 2
    result = outcome.result
    assert result.status is Status.INFRA_ERROR and result.stage == "actor"
    assert "died 2 times" in result.message and "ActorDiedError" in result.message
    assert result.problem_id == problem.id and result.platform == "cpu-triton"
    assert _gone(first) and _gone(second)

    [after] = pool.map([_request("honest", HONEST, problem)])  # the search goes on
    assert after.result.status is Status.OK and after.attempts == 1


BROKEN_REFERENCE = '''"""A reference that raises where it runs."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("this reference is broken on purpose")


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''


def test_references_that_cannot_run_are_found_before_a_search(pool, problem, tmp_path):
    path = tmp_path / "broken_reference.py"
    path.write_text(BROKEN_REFERENCE)
    broken = resolve_problem(str(path))
    failed = pool.check_references([problem, broken])
    assert list(failed) == [broken.id] and "broken on purpose" in failed[broken.id]
    [outcome] = pool.map([_request("of-broken", HONEST, broken)])  # not judged
    result = outcome.result
    assert result.status is Status.INFRA_ERROR and result.stage == REFERENCE_STAGE
    assert result.message.startswith("not judged: the problem's reference failed")
    assert pool.check_references([problem]) == {}  # and the pool goes on


def test_an_idle_actor_that_evaluated_the_problem_lately_gets_it():
    """Its references and oracles are warm there (pool.WARM_PROBLEMS): the actor that
    evaluated it last first, then one that did before; else the actor idle longest."""
    warm = {0: deque(["a"]), 1: deque(["b", "c"]), 2: deque()}
    assert pick_work([0, 1, 2], ["c"], warm, False) == (1, 0)
    assert pick_work([2, 0, 1], ["a"], warm, False) == (0, 0)
    assert pick_work([2, 0, 1], ["z"], warm, False) == (2, 0)
    assert pick_work([2], ["a"], warm, False) == (2, 0)
    warm[2] = deque(["c", "b"])  # b last: before 1, which evaluated c after b
    assert pick_work([1, 2], ["b"], warm, False) == (2, 0)
    assert pick_work([1, 2], ["c"], warm, False) == (1, 0)
    assert pick_work([1, 2], ["c", "b"], warm, True) == (1, 0)  # the head's turn: its best


class _Actor:
    """Stands for an evaluator actor's handle: `evaluate.remote` records what it was sent."""

    def __init__(self, slot: int, sent: list):
        self.evaluate = self
        self.slot, self.sent = slot, sent

    def remote(self, source, problem, platform, unseen_below_ms=None):
        self.sent.append((self.slot, problem.id))
        self.below = unseen_below_ms
        return f"ref-{len(self.sent)}"


def test_dispatch_sends_a_problem_back_to_the_actor_that_evaluated_it():
    """Two actors, problems a and b: once each has evaluated one, the next of each problem
    goes to the same actor, whichever of them has been idle longer."""
    sent: list = []
    pool = EvaluatorPool.__new__(EvaluatorPool)
    pool._actors = [_Actor(0, sent), _Actor(1, sent)]
    pool.platform = get_platform("cpu-cpp")
    pool._idle, pool._queue, pool._running, pool._warm = deque([0, 1]), deque(), {}, {}
    pool._passed = 0
    a = resolve_problem("level1/10_elementwise_chain", size_set="ci")
    b = resolve_problem("level1/04_softmax", size_set="ci")
    pool._queue.extend([(EvalRequest("1", "", a), 1), (EvalRequest("2", "", b), 1)])
    pool._dispatch()
    assert sent == [(0, a.id), (1, b.id)]
    pool._running.clear()
    pool._idle.extend([0, 1])  # both done; 0 idle longer
    pool._queue.extend([(EvalRequest("3", "", b), 1), (EvalRequest("4", "", a), 1)])
    pool._dispatch()
    assert sent[2:] == [(1, b.id), (0, a.id)]


def test_an_idle_actor_takes_a_queued_request_of_its_last_problem_before_the_head():
    """One actor idles at a time in a steady search: it takes the queued request of the
    problem it evaluated last, not the head; a head passed over long enough goes first."""
    warm = {0: deque(["b", "a"]), 1: deque(["c"])}
    assert pick_work([0], ["c", "b", "a"], warm, False) == (0, 2)  # a: its last
    assert pick_work([0], ["c", "b"], warm, False) == (0, 1)  # b: before that
    assert pick_work([0], ["c", "d"], warm, False) == (0, 0)  # neither: the head
    assert pick_work([0], ["c", "a"], warm, True) == (0, 0)  # the head's turn
    assert pick_work([0, 1], ["a", "c"], warm, False) == (0, 0)


def test_a_passed_over_head_is_sent_once_the_pool_has_passed_it_size_times():
    sent: list = []
    pool = EvaluatorPool.__new__(EvaluatorPool)
    pool._actors = [_Actor(0, sent)]
    pool.platform = get_platform("cpu-cpp")
    pool._running, pool._passed, pool._warm = {}, 0, {0: deque(["a"])}
    a = resolve_problem("level1/10_elementwise_chain", size_set="ci")
    b = resolve_problem("level1/04_softmax", size_set="ci")
    pool._warm = {0: deque([a.id])}
    pool._queue = deque([(EvalRequest("b", "", b), 1), (EvalRequest("a1", "", a), 1),
                         (EvalRequest("a2", "", a), 1)])  # fmt: skip
    for _ in range(3):
        pool._idle = deque([0])
        pool._dispatch()
    assert [problem for _, problem in sent] == [a.id, b.id, a.id]  # a, then b's turn (size 1)


def test_a_requests_best_kept_time_reaches_the_actor():
    """search.evaluations.Request's unseen_below_ms goes with it to the evaluator actor."""
    from kforge_search.actors.pool import PoolEvaluations
    from kforge_search.search.evaluations import Request

    sent: list = []
    pool = EvaluatorPool.__new__(EvaluatorPool)
    pool._actors = [_Actor(0, sent)]
    pool.platform = get_platform("cpu-cpp")
    pool._idle, pool._queue, pool._running, pool._warm = deque([0]), deque(), {}, {}
    pool._passed = 0
    a = resolve_problem("level1/10_elementwise_chain", size_set="ci")
    PoolEvaluations(pool).submit(Request("1", "", a, unseen_below_ms=1.5))
    assert sent == [(0, a.id)] and pool._actors[0].below == 1.5
