"""One problem's search in a bench (search/suite_bench.search_problem): the reference first,
an agent's error, the unseen check spared for a draft no faster than the best kept one, and
evaluators idle elsewhere lent to take drafts side by side (cli/bench_jobs.Lender)."""

from __future__ import annotations

import types

import pytest

from kforge_search.evaluator.result import Status
from kforge_search.search.suite_bench import (
    AgentError,
    bench_row,
    best_parent,
    search_problem,
    unrunnable_row,
)
from tests.search.test_suite_bench import PROBLEM, Draft, result


class _Agent:
    """Proposes one fixed draft, then raises."""

    def __init__(self, fail_at: int):
        self.fail_at = fail_at

    def supports(self, problem, platform):
        from kforge_search.agents.base import Support

        return Support(True)

    def propose(self, context):
        if len(context.parents) >= self.fail_at:
            raise TypeError("the agent broke")
        return [Draft(f"# draft {len(context.parents)}", "cuda-triton", "fake", "note")]


class _Evaluator:
    def __init__(self, reference_error: Exception | None = None):
        self.reference_error = reference_error

    def reference(self, problem, platform):
        if self.reference_error is not None:
            raise self.reference_error
        parts = (("start, waits", 0.4), ("float64", 2.5), ("read", 0.01))
        return types.SimpleNamespace(spent=parts)  # (evaluator/reference.Reference's)

    def close_oracles(self):
        pass

    def evaluate_source(self, source, problem, platform, unseen_below_ms=None):
        return result(Status.OK, 1.0)


def test_an_agent_error_after_some_drafts_keeps_them():
    from kforge_search.platforms import get_platform

    plat = get_platform("cuda-triton")
    searched = search_problem(PROBLEM, plat, "strict", 4, _Evaluator(), _Agent(fail_at=2))
    assert len(searched.parents) == 2 and searched.agent_error == "TypeError: the agent broke"
    row = bench_row(PROBLEM, searched.parents, "", None, None, (), searched.agent_error)
    assert row.verified and row.message.startswith("agent error after 2 drafts: TypeError")
    with pytest.raises(AgentError, match="TypeError: the agent broke"):
        search_problem(PROBLEM, plat, "strict", 4, _Evaluator(), _Agent(fail_at=0))


def test_the_reference_runs_before_the_agent_is_asked_for_a_draft():
    from kforge_search.platforms import get_platform
    from kforge_search.problem import ProblemError

    agent = _Agent(fail_at=0)  # would raise AgentError if asked
    failing = _Evaluator(ProblemError("the reference of x failed (killed: memory limit)"))
    with pytest.raises(ProblemError, match="memory limit"):
        search_problem(PROBLEM, get_platform("cuda-triton"), "strict", 2, failing, agent)
    reason = "the reference failed:\nTraceback:\n  File x\n    y()\nValueError: why\n"
    row = unrunnable_row(PROBLEM, "REFERENCE_FAILED", reason)
    assert row.message == "the reference failed: | ... | ValueError: why"
    assert not row.verified
    with pytest.raises(ValueError, match="use one of"):
        unrunnable_row(PROBLEM, "OK", "")


class _Timed(_Evaluator):
    """Times its drafts at the given p50s in turn, and records what it was asked."""

    def __init__(self, times: list[tuple[float, str]]):
        super().__init__()
        self.times, self.asked = list(times), []

    def evaluate_source(self, source, problem, platform, unseen_below_ms=None):
        self.asked.append(unseen_below_ms)
        ms, generalizes = self.times.pop(0)
        return result(Status.OK, ms, generalizes)


class _Drafts(_Agent):
    def __init__(self):
        super().__init__(fail_at=99)


def test_each_draft_after_the_first_kept_one_is_checked_at_the_unseen_sizes_only_if_faster():
    """The evaluator is told the best kept draft's time: a draft no faster cannot be kept, so
    its unseen sizes' check is spared. A draft that failed the unseen sizes is not kept."""
    from kforge_search.platforms import get_platform

    ev = _Timed([(2.0, "yes"), (1.0, "no"), (3.0, "unchecked"), (1.5, "yes"), (1.2, "yes")])
    searched = search_problem(PROBLEM, get_platform("cuda-triton"), "strict", 5, ev, _Drafts())
    assert ev.asked == [None, 2.0, 2.0, 2.0, 1.5]
    assert best_parent(searched.parents).p50_ms == 1.2


class _Pool:
    """Evaluators lent to a problem: `free` of them, each recorded while it is out."""

    def __init__(self, free: int):
        self.free, self.out, self.asked = free, 0, []

    def borrow(self, wanted):
        self.asked.append(wanted)
        n = min(wanted, self.free)
        self.free, self.out = self.free - n, self.out + n
        return [_Timed([(1.0 + i, "yes")] * 20) for i in range(n)]

    def give_back(self, lent):
        self.free, self.out = self.free + len(lent), self.out - len(lent)


class _Many(_Agent):
    """Proposes as many drafts as the context's budget allows, each its own."""

    def __init__(self):
        super().__init__(fail_at=99)
        self.asked = []

    def propose(self, context):
        self.asked.append((context.budget, context.remaining))
        n = len(context.parents)
        return [
            Draft(f"# draft {n + i}", "cuda-triton", "fake", "note") for i in range(context.budget)
        ]


def test_lent_evaluators_take_drafts_side_by_side_after_the_first_and_come_back():
    from kforge_search.platforms import get_platform

    pool, agent = _Pool(free=2), _Many()
    own = _Timed([(5.0, "yes")] * 20)
    searched = search_problem(
        PROBLEM, get_platform("cuda-triton"), "strict", 6, own, agent, lent=pool
    )
    # the first draft alone; then three at once (two lent), twice: 1 + 3 + 2 = 6
    assert agent.asked == [(1, 6), (3, 5), (2, 2)]
    assert pool.asked == [4, 1] and pool.out == 0 and pool.free == 2
    assert [p.draft.source for p in searched.parents] == [f"# draft {i}" for i in range(6)]
    assert len(own.asked) == 3  # the first draft and the first of each side-by-side step
    assert best_parent(searched.parents).p50_ms == 1.0  # a lent evaluator's draft is kept


def test_a_lender_lends_nothing_while_a_problem_waits_or_the_device_has_no_room():
    import queue

    from kforge_search.cli.bench_jobs import Lender
    from kforge_search.search.device_room import DeviceRoom

    idle: queue.SimpleQueue = queue.SimpleQueue()
    for name in ("e1", "e2", "e3"):
        idle.put(types.SimpleNamespace(name=name, close_oracles=lambda: None))
    room, waiting = DeviceRoom(), [True]
    lender = Lender(idle, room, lambda: waiting[0])
    with room.taken(0.3):  # the borrowing problem's own share
        assert lender.borrow(3, 0.3) == []  # another problem waits for a job
        waiting[0] = False
        lent = lender.borrow(3, 0.3)
        assert len(lent) == 2  # 0.3 x 3 fits, a fourth would not
        lender.give_back(lent, 0.3)
        assert len(lender.borrow(1, 0.3)) == 1


def test_a_bench_row_says_how_long_its_reference_took_and_on_what(monkeypatch):
    from rich.console import Console

    from kforge_search.cli import bench_problem as bp
    from kforge_search.platforms import get_platform

    agent = _Agent(fail_at=99)
    agent.plan = lambda problem: types.SimpleNamespace(graph=types.SimpleNamespace(work=None))
    monkeypatch.setattr(bp, "REFERENCE_SHOWN_S", 0.0)
    log = Console(record=True, width=200)
    row, parents = bp.bench_problem(
        PROBLEM, _Evaluator(), platform=get_platform("cuda-triton"), policy="strict", budget=1,
        agent=agent, seed=0, screen=0, log=log,
    )  # fmt: skip
    text = log.export_text()
    assert len(parents) == 1 and row.verified, text
    assert f"{PROBLEM.name}: reference 0.0 s before its first draft (float64 2.5, start," in text
    assert text.index("before its first draft") < text.index(" ms (")  # before the draft's line
    assert "read 0.0" not in text  # parts under 0.05 s are left out
    assert 0.0 <= row.reference_s <= row.seconds
