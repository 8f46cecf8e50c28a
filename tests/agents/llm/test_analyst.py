"""The performance-analysis agent through the real SDKs and the scripted server, on a real
profile (cpu-triton, evaluated here): image models get the roofline/timeline PNG, text
models do not; a JSON answer becomes the analysis; an unusable answer or a failed call
leaves the rules' analysis, with the call counted when it was made."""

from __future__ import annotations

import base64
import dataclasses

import pytest

from kforge_search.agents.base import Draft, Parent
from kforge_search.agents.llm.analyst import Analyst
from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.llm.config import LLMConfig
from kforge_search.llm.providers import make_provider
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.conftest import EXAMPLES
from tests.llm.server import Say, ScriptedLLM
from tests.llm.server import Status as HTTPStatus

pytestmark = pytest.mark.llm

PROBLEM = resolve_problem("level1/10_elementwise_chain", size_set="ci")
TRITON = get_platform("cpu-triton")
CANDIDATE = EXAMPLES / "triton" / "elementwise_chain.py"
JSON = (
    "The chain is one memory-bound pass.\n```json\n"
    '{"bottleneck": "memory", "summary": "one pass, low bandwidth", "suggestions": ['
    '{"title": "Vectorize", "detail": "wider blocks", "expected_gain": "up to 1.4x"}]}\n```'
)


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")


@pytest.fixture(scope="module")
def profiled() -> Parent:
    evaluator = Evaluator(EvalConfig(baselines=(), profile=True, check_unseen=False))
    result = evaluator.evaluate(CANDIDATE, PROBLEM, TRITON)
    assert result.status is Status.OK and result.profile is not None, result.message
    return Parent(Draft(CANDIDATE.read_text(), TRITON.name, "llm", "seed"), result)


def _analyst(server: ScriptedLLM, kind: str, model: str, calls: list, **kw) -> Analyst:
    url = f"{server.url}/v1" if kind == "openai" else server.url
    config = LLMConfig(kind, model, base_url=url, max_retries=0, **kw)
    return Analyst(make_provider(config), on_call=calls.append)


def _parts(server: ScriptedLLM) -> list:
    content = server.seen[-1].body["messages"][-1]["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def test_an_image_model_gets_the_png_and_its_json_becomes_the_analysis(profiled):
    calls: list = []
    with ScriptedLLM(Say(JSON, 300, 60)) as server:
        report = _analyst(server, "openai", "gpt-4o", calls).report(
            PROBLEM, TRITON, "strict", profiled, budget=3
        )
        parts = _parts(server)
    assert not isinstance(report, str)
    (image,) = [p for p in parts if p["type"] == "image_url"]
    png = base64.b64decode(image["image_url"]["url"].split(",", 1)[1])
    assert png.startswith(b"\x89PNG") and png == report.image
    text = next(p["text"] for p in parts if p["type"] == "text")
    assert "The attached image shows the roofline" in text and report.digest in text
    analysis = report.analysis
    assert (analysis.agent, analysis.bottleneck, analysis.model) == ("llm", "memory", "gpt-4o")
    assert (analysis.tokens_in, analysis.tokens_out, analysis.images) == (300, 60, 1)
    assert analysis.suggestions[0].title == "Vectorize" and len(calls) == 1


def test_a_text_model_on_anthropic_gets_no_image(profiled):
    with ScriptedLLM(Say(JSON)) as server:
        analyst = _analyst(server, "anthropic", "text-only-model", [])
        report = analyst.report(PROBLEM, TRITON, "strict", profiled)
        parts = _parts(server)
    assert [p["type"] for p in parts] == ["text"] and report.image == b""
    assert "The attached image" not in parts[0]["text"]
    assert report.analysis.agent == "llm"


def test_an_unusable_answer_keeps_the_rules_and_counts_the_call(profiled):
    calls: list = []
    with ScriptedLLM(Say("It looks fine to me.", 200, 5)) as server:
        analyst = _analyst(server, "openai", "some-model", calls)
        report = analyst.report(PROBLEM, TRITON, "strict", profiled)
    assert report.analysis.agent == "rules" and report.analysis.model == "some-model"
    assert report.analysis.tokens_in == 200 and len(calls) == 1
    assert analyst.errors == ["unusable analysis: no JSON object in the reply"]


def test_a_failed_call_leaves_the_rules_analysis_and_the_error(profiled):
    calls: list = []
    with ScriptedLLM(HTTPStatus(500)) as server:
        analyst = _analyst(server, "openai", "some-model", calls)
        report = analyst.report(PROBLEM, TRITON, "strict", profiled)
    assert report.analysis.agent == "rules" and report.analysis.model == "" and calls == []
    assert len(analyst.errors) == 1 and analyst.errors[0].startswith("server")


def test_without_an_llm_the_rules_alone_answer_and_an_unprofiled_result_says_why(profiled):
    report = Analyst().report(PROBLEM, TRITON, "loose", profiled)
    assert report.analysis.agent == "rules" and report.image == b""
    assert "kernel launches per call" in report.digest
    assert "timed in an interpreter" in report.digest  # cpu-triton times mean nothing
    bare = Parent(profiled.draft, dataclasses.replace(profiled.result, profile=None))
    assert Analyst().report(PROBLEM, TRITON, "loose", bare).startswith("not profiled")
