"""Lineages of a generation propose side by side: an LLM lineage waiting for a slow model
(the real openai SDK against a scripted local server) delays no other lineage's evaluation,
and the calls of several LLM lineages overlap, up to the concurrency bound."""

from __future__ import annotations

import asyncio
import time

import pytest

from kforge_search.agents.base import Draft, Support
from kforge_search.agents.llm.agent import LLMAgent
from kforge_search.evaluator.result import EvalResult, Status
from kforge_search.llm import loop as llm_loop
from kforge_search.llm.config import LLMConfig
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem, source_hash
from kforge_search.search.generation import run_generation
from kforge_search.search.lineage import Lineage
from tests.llm.server import Say, ScriptedLLM, Slow

pytestmark = pytest.mark.llm

PROBLEM = resolve_problem("level1/10_elementwise_chain", size_set="ci")
TRITON = get_platform("cpu-triton")
CODE = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    n = {}\n"


class Quick:
    """A builtin-like agent: proposes at once, in the generation's own thread."""

    name = "quick"

    def supports(self, problem, platform) -> Support:
        return Support(True)

    def propose(self, context) -> list[Draft]:
        return [Draft(CODE.format(f"'quick-{context.seed}'"), TRITON.name, self.name, "fast")]


class Clock:
    """evaluate_many that answers at once and notes when each draft arrived."""

    def __init__(self):
        self.start = time.monotonic()
        self.arrived: dict[str, float] = {}

    def __call__(self, requests):
        for r in requests:
            self.arrived[r.key.split("/")[0]] = time.monotonic() - self.start
            yield r.key, _ok(r.source)


def _ok(source: str) -> EvalResult:
    return EvalResult(Status.OK, "", "done", PROBLEM.id, PROBLEM.name, TRITON.name, "strict",
                      source_hash(source, TRITON.name))  # fmt: skip


def _llm(server: ScriptedLLM) -> LLMAgent:
    config = LLMConfig("openai", "gpt-4o", base_url=f"{server.url}/v1", max_retries=0)
    return LLMAgent(config)


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def test_a_slow_model_delays_no_other_lineage_evaluation():
    reply = Say(f"```python\n{CODE.format(1)}```")
    with ScriptedLLM(Slow(2.5, reply)) as server:
        slow = Lineage("slow", PROBLEM, TRITON, _llm(server))
        quick = Lineage("quick", PROBLEM, TRITON, Quick())
        clock, order = Clock(), []
        steps = run_generation(
            [slow, quick], clock, budget=1, on_step=lambda lin, step: order.append(lin.lineage_id)
        )
    assert clock.arrived["quick"] < 1.5 <= 2.5 <= clock.arrived["slow"]  # not after the call
    assert order == ["quick", "slow"]  # each step recorded as soon as its results were in
    assert [len(s.members) for s in steps] == [1, 1]  # returned in the lineages' order
    assert steps[0].members[0].lineage_id == "slow"
    (call,) = steps[0].llm_calls
    assert call.ok and call.latency_s >= 2.5 and call.attempts == 1


@pytest.mark.parametrize(("concurrency", "least", "most"), [(8, 1.5, 2.7), (1, 3.0, 9.0)])
def test_the_calls_of_llm_lineages_overlap_up_to_the_bound(concurrency, least, most):
    replies = [Slow(1.5, Say(f"```python\n{CODE.format(i)}```")) for i in range(2)]
    with ScriptedLLM(*replies) as server:
        agent = _llm(server)  # one agent shared by both lineages, as in a search
        assert agent.provider is not None  # its client made before the clock starts
        lineages = [Lineage(f"llm-{i}", PROBLEM, TRITON, agent, seed=i) for i in range(2)]
        started = time.monotonic()
        steps = run_generation(lineages, Clock(), budget=1, concurrency=concurrency)
        took = time.monotonic() - started
    assert least <= took < most
    assert all(len(s.members) == 1 and s.llm_calls[0].ok for s in steps)
    assert len({s.members[0].candidate_id for s in steps}) == 2


def test_an_interrupt_ends_the_calls_in_flight_at_once():
    reply = Say(f"```python\n{CODE.format(1)}```")
    with ScriptedLLM(Slow(8.0, reply)) as server:
        slow = Lineage("slow", PROBLEM, TRITON, _llm(server))
        quick = Lineage("quick", PROBLEM, TRITON, Quick())

        def interrupt(lineage, step):  # Ctrl-C while the slow lineage waits for its model
            until = time.monotonic() + 30
            while not server.seen and time.monotonic() < until:
                time.sleep(0.05)
            assert server.seen and _in_flight() == 1
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            run_generation([slow, quick], Clock(), budget=1, on_step=interrupt)
        until = time.monotonic() + 2.0
        while _in_flight() and time.monotonic() < until:
            time.sleep(0.05)
        assert _in_flight() == 0  # the call was cancelled, not left to run its 8 s


def _in_flight() -> int:
    """LLM calls still running on the process's event loop."""

    async def count() -> int:
        me = asyncio.current_task()
        return sum(1 for t in asyncio.all_tasks() if t is not me and not t.done())

    return asyncio.run_coroutine_threadsafe(count(), llm_loop._loop()).result(timeout=5)
