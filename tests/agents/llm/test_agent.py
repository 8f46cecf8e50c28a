"""The LLM generation agent through the real openai SDK and a scripted local server: what
its prompts carry (the compiler log of a failed attempt, the digest of the best) and how it
turns replies into drafts."""

from __future__ import annotations

import jinja2
import pytest

from kforge_search import prompts
from kforge_search.agents.base import Context, Draft, Parent, Reference
from kforge_search.agents.llm.agent import LLMAgent, guide_key
from kforge_search.evaluator.result import Artifacts, Baseline, EvalResult, Status, TimingStats
from kforge_search.evaluator.static_check import static_check
from kforge_search.llm.calls import recording
from kforge_search.llm.config import LLMConfig
from kforge_search.llm.providers import make_provider
from kforge_search.platforms import PLATFORMS, get_platform
from kforge_search.problem import resolve_problem
from tests.llm.server import Say, ScriptedLLM
from tests.llm.server import Status as Http

pytestmark = pytest.mark.llm

PROBLEM = resolve_problem("level1/10_elementwise_chain", size_set="ci")
TRITON = get_platform("cpu-triton")
CODE = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"
LOG = "candidate.cpp:12:5: error: expected ';' before '}' token"


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def _agent(server: ScriptedLLM, calls: list) -> LLMAgent:
    config = LLMConfig("openai", "gpt-4o", base_url=f"{server.url}/v1", max_retries=0)
    return LLMAgent(make_provider(config), on_call=calls.append)


def _result(status: Status, **kw) -> EvalResult:
    return EvalResult(status, kw.pop("message", ""), kw.pop("stage", "done"), PROBLEM.id,
                      PROBLEM.name, TRITON.name, "strict", "c0", **kw)  # fmt: skip


def _prompt(server: ScriptedLLM, i: int = -1) -> str:
    return "\n".join(m["content"] for m in server.seen[i].body["messages"])


def test_functional_pass_then_the_compiler_log_reaches_the_next_prompt():
    calls: list = []
    reply = f"I fused the chain into one kernel.\n\n```python\n{CODE}```\nDone."
    with ScriptedLLM(Say(reply), Say(reply)) as server:
        agent = _agent(server, calls)
        (first,) = agent.propose(Context(PROBLEM, TRITON, "strict"))
        assert first.source == CODE and first.agent == "llm"
        text = _prompt(server)
        assert "functional pass" in text and PROBLEM.source.strip() in text
        assert "Triton guide" in text and "An example of the format" in text  # one-shot
        failed = _result(Status.COMPILE_ERROR, stage="build", message="the build failed",
                         artifacts=Artifacts(compile_log=LOG))  # fmt: skip
        agent.propose(Context(PROBLEM, TRITON, "strict", (Parent(first, failed),)))
        text = _prompt(server)
    assert "Your previous attempt" in text and LOG in text and "COMPILE_ERROR at build" in text
    assert len(calls) == 2 and calls[0].tokens_in == 100  # every call reported


def test_optimization_pass_carries_the_best_and_its_digest():
    timing = TimingStats("perf_counter", 20, 0.9, 1.0, 1.1)
    base = Baseline("eager", True, TimingStats("perf_counter", 20, 2.0, 2.0, 2.0))
    ok = _result(Status.OK, timing=timing, baselines=(base,), generalizes="yes")
    best = Draft(CODE, TRITON.name, "llm", "first")
    with ScriptedLLM(Say(f"```python\n{CODE}```")) as server:
        _agent(server, []).propose(Context(PROBLEM, TRITON, "strict", (Parent(best, ok),)))
        text = _prompt(server)
    assert "optimization pass" in text and "1.0000 ms, 2.00x over PyTorch" in text
    assert "p50 1.0000" in text and "2.00x vs PyTorch eager" in text


def test_an_unusable_reply_is_a_draft_the_static_check_rejects_with_the_reason_kept():
    with ScriptedLLM(Say("Sorry, I would rather explain the math than write code.")) as server:
        (draft,) = _agent(server, []).propose(Context(PROBLEM, TRITON, "strict"))
    assert draft.note.startswith("unusable reply") and "no ```python code block" in draft.note
    assert not static_check(draft.source, TRITON.language).ok


def test_every_platform_has_a_guide_and_templates_refuse_missing_values():
    for platform in PLATFORMS.values():
        assert prompts.render(f"guides/{guide_key(platform)}.j2").strip()
    with pytest.raises(jinja2.UndefinedError):
        prompts.render("functional.j2", platform=TRITON, budget=1, problem_source="x")


def test_supervision_decides_what_a_functional_prompt_shows_and_the_budget_its_advice():
    same = Reference("# SAME-PLATFORM KERNEL", PROBLEM.name, TRITON.name, 1.5)
    other = Reference("# CUDA KERNEL", PROBLEM.name, "cuda-triton", 3.0)
    config = LLMConfig("openai", "gpt-4o")  # the provider is made on first call: none here

    def shown(supervision: str, budget: int = 3) -> str:
        agent = LLMAgent(config, supervision=supervision)
        return agent.prompt(Context(PROBLEM, TRITON, "strict", (), (same, other), budget))

    example = "An example of the format"
    auto = shown("auto")
    assert "SAME-PLATFORM" in auto and "CUDA KERNEL" in auto and example not in auto
    assert "port the algorithm, not the code" in auto  # said of the other platform's only
    free = shown("reference-free")
    assert "SAME-PLATFORM" not in free and "CUDA KERNEL" not in free and example not in free
    assert "No example or reference kernel comes with this task" in free
    cross = shown("cross-platform")
    assert "CUDA KERNEL" in cross and "SAME-PLATFORM" not in cross and example not in cross
    one = shown("one-shot")
    assert example in one and "SAME-PLATFORM" not in one and "CUDA KERNEL" not in one
    assert "This is the last evaluation" in shown("auto", budget=1)
    assert "This is the last evaluation" not in auto
    with pytest.raises(ValueError, match="supervision 'mentored'"):
        LLMAgent(config, supervision="mentored")


def _noted(agent: LLMAgent, context: Context) -> tuple[list, list]:
    with recording() as calls:
        drafts = agent.propose(context)
    return drafts, calls


def test_a_cut_reply_is_not_evaluated_but_asked_again_shorter():
    cut = Say("```python\nimport torch\n\nclass ModelNew(torch.nn", 100, 16384, cut=True)
    with ScriptedLLM(cut, Say(f"```python\n{CODE}```", 120, 300)) as server:
        drafts, calls = _noted(_agent(server, []), Context(PROBLEM, TRITON, "strict"))
        again = _prompt(server)
    (draft,) = drafts
    assert draft.source == CODE
    assert [c.status for c in calls] == ["truncated", "ok"]
    assert calls[0].tokens_out == 16384 and "cut at the output limit" in calls[0].error
    assert "cut off at the output limit (16384 tokens" in again and "shorter" in again
    assert calls[1].subject == CODE


def test_a_reply_cut_twice_proposes_nothing_and_says_why():
    cut = Say("```python\nclass ModelNew(", 100, 16384, cut=True)
    with ScriptedLLM(cut, cut) as server:
        drafts, calls = _noted(_agent(server, []), Context(PROBLEM, TRITON, "strict"))
    assert drafts == [] and [c.status for c in calls] == ["truncated", "truncated"]
    assert "twice" in calls[1].error


def test_a_failed_call_proposes_nothing_and_is_noted_with_its_reason():
    with ScriptedLLM(Http(503)) as server:
        drafts, calls = _noted(_agent(server, []), Context(PROBLEM, TRITON, "strict"))
    (call,) = calls
    assert drafts == [] and (call.status, call.http_status, call.attempts) == ("http_error", 503, 1)
    with ScriptedLLM(Say("Sorry, no code today.")) as server:
        drafts, calls = _noted(_agent(server, []), Context(PROBLEM, TRITON, "strict"))
    assert len(drafts) == 1 and [c.status for c in calls] == ["unparsable"]


def test_the_prompt_tells_what_is_really_left_and_carries_the_log_once():
    agent = LLMAgent(LLMConfig("openai", "gpt-4o"))
    many = agent.prompt(Context(PROBLEM, TRITON, "strict", budget=1, remaining=7))
    assert "7 evaluation(s) left" in many and "This is the last evaluation" not in many
    last = agent.prompt(Context(PROBLEM, TRITON, "strict", budget=1, remaining=1))
    assert "1 evaluation(s) left" in last and "This is the last evaluation" in last
    log = "\n".join(f"candidate.cpp:{i}:5: error: expected ';' (line {i})" for i in range(30))
    failed = _result(
        Status.COMPILE_ERROR,
        stage="build",
        message=f"RuntimeError at import: {log}\nFix the build error (see the compiler log).",
        artifacts=Artifacts(compile_log=log),
    )
    first = Draft(CODE, TRITON.name, "llm", "first")
    text = agent.prompt(Context(PROBLEM, TRITON, "strict", (Parent(first, failed),)))
    assert text.count("candidate.cpp:17:5") == 1  # the log, once
    assert "RuntimeError at import: (see the log below)" in text and "Fix the build" in text
