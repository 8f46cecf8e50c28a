"""The performance-analysis agent: an evaluated candidate's profile in, recommendations out.

Always the rule-based analysis first (analysis/rules.py): the digest, a bottleneck and
suggestions. With an LLM configured, the model gets the digest, the rules' verdict, the
source and, for models that take images, the rendered roofline + timeline (the visual
profiler path), and answers in JSON; a failed call or an unusable answer leaves the rules'
analysis standing (the call is still counted and noted in the journal, llm/calls.py). The
rules and the figure are made under agents.base.SERIAL (tracing and matplotlib are not
thread-safe), the model call outside it. Runs where the agents run (lineage actors), never
on an evaluator.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from kforge_search import prompts
from kforge_search.agents.base import SERIAL, Parent
from kforge_search.analysis import rules
from kforge_search.analysis.rules import Analysis, Suggestion
from kforge_search.analysis.work import Work, counted_work
from kforge_search.evaluator.profile import Profile
from kforge_search.hardware import Peaks, platform_peaks
from kforge_search.llm import loop
from kforge_search.llm.calls import LLMCall, note
from kforge_search.llm.config import LLMConfig, LLMError, Message, Reply
from kforge_search.llm.providers import Provider
from kforge_search.platforms import Platform
from kforge_search.problem import Problem

MAX_SUGGESTIONS = 4
JSON_BLOCK = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Report:
    """What the analyst made of one evaluated candidate."""

    analysis: Analysis
    digest: str
    profile: Profile
    image: bytes = b""  # the PNG, when rendered


def parse_analysis(text: str) -> Analysis | str:
    """The model's JSON answer as an Analysis, or why it is not usable."""
    blocks = JSON_BLOCK.findall(text) or [text[text.find("{") : text.rfind("}") + 1]]
    for block in reversed(blocks):
        try:
            data = json.loads(block)
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        bottleneck = str(data.get("bottleneck", "")).strip().lower()
        if bottleneck not in rules.BOTTLENECKS:
            return f"bottleneck {bottleneck!r} is not one of {', '.join(rules.BOTTLENECKS)}"
        items = data.get("suggestions", [])
        if not isinstance(items, list) or not all(isinstance(s, dict) for s in items):
            return "suggestions is not a list of objects"
        suggestions = tuple(
            Suggestion(
                str(s.get("title", "")).strip(),
                str(s.get("detail", "")).strip(),
                str(s.get("expected_gain", "")).strip() or "not estimated",
            )
            for s in items[:MAX_SUGGESTIONS]
            if str(s.get("title", "")).strip()
        )
        return Analysis(bottleneck, str(data.get("summary", "")).strip(), suggestions, "llm")
    return "no JSON object in the reply"


class Analyst:
    """`report(...)` for an evaluated, profiled candidate. With `provider` (or an LLMConfig,
    made into one on first use) the LLM refines the rules' analysis."""

    def __init__(
        self,
        provider: Provider | LLMConfig | None = None,
        on_call: Callable[[Reply], None] | None = None,
        images: bool | None = None,
    ):
        self._config = provider if isinstance(provider, LLMConfig) else None
        self._provider = None if isinstance(provider, LLMConfig) else provider
        self.on_call = on_call
        self._images = images
        self.errors: list[str] = []
        self._work: dict[str, Work | str] = {}

    @property
    def provider(self) -> Provider | None:
        with SERIAL:  # made once, whichever thread asks first
            if self._provider is None and self._config is not None:
                from kforge_search.llm.providers import make_provider

                self._provider = make_provider(self._config)
            return self._provider

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self._config is not None:
            state["_provider"] = None
        return state

    def shares(self, provider: Any) -> bool:
        """Whether this analyst talks through `provider` (then it is remade with it)."""
        return provider is not None and self._provider is provider

    def _accepts_images(self) -> bool:
        if self._images is not None:
            return self._images
        provider = self.provider
        return bool(getattr(provider, "images", False))

    def work(self, problem: Problem) -> Work | str:
        key = f"{problem.id}|{problem.sizes_key}"
        if key not in self._work:
            self._work[key] = problem_work(problem)
        return self._work[key]

    def report(
        self, problem: Problem, platform: Platform, policy: str, parent: Parent, budget: int = 1
    ) -> Report | str:
        """The report, or why there is none (the evaluator did not profile the candidate)."""
        from kforge_search.agents.builtin.genome import admissible_precisions

        result = parent.result
        profile = result.profile
        if profile is None:
            return "not profiled: run the search with profiling on"
        provider = self.provider
        with SERIAL:
            work = self.work(problem)
            peaks = platform_peaks(platform, result.device_name)
            precision = parent.draft.precision
            timing = result.timing
            meaningful = bool(timing and timing.meaningful)
            ms = timing.p50_ms if timing and meaningful else None
            text = rules.digest(profile, work, peaks, precision, ms, meaningful)
            verdict = rules.analyze(
                profile, work, peaks, precision, ms, admissible_precisions(policy),
                os.cpu_count() or 1,
            )  # fmt: skip
            image = b""
            if provider is not None and self._accepts_images():
                figures = rules.figures(profile, work, peaks, precision, ms)
                title = f"{problem.name} on {platform.name} ({result.device_name})"
                image = _render(profile, work, peaks, figures, title, precision)
        if provider is None:
            return Report(verdict, text, profile, image)
        return Report(
            self._ask(provider, problem, platform, policy, parent, text, verdict, image, budget),
            text,
            profile,
            image,
        )

    def _ask(
        self,
        provider: Provider,
        problem: Problem,
        platform: Platform,
        policy: str,
        parent: Parent,
        text: str,
        verdict: Analysis,
        image: bytes,
        budget: int,
    ) -> Analysis:
        system = prompts.render(
            "analyst_system.j2",
            platform=platform,
            policy=policy,
            bottlenecks=rules.BOTTLENECKS,
            max_suggestions=MAX_SUGGESTIONS,
        )
        user = prompts.render(
            "analyze.j2",
            platform=platform,
            budget=budget,
            problem_source=problem.source,
            source=parent.draft.source,
            precision=parent.draft.precision,
            digest=text,
            rules=verdict.text(),
            image=bool(image),
        )
        message = Message("user", user, (image,) if image else ())
        subject = parent.draft.source
        try:
            reply = loop.run(provider.complete(system, [message]))
        except LLMError as exc:
            self.errors.append(f"{exc.kind}: {exc}")
            note(LLMCall.of_error("analyst", provider.config.model, exc, subject=subject))
            return verdict
        if self.on_call is not None:
            self.on_call(reply)
        cost = {
            "model": reply.model,
            "tokens_in": reply.tokens_in,
            "tokens_out": reply.tokens_out,
            "cost_usd": reply.cost_usd,
            "images": 1 if image else 0,
        }
        parsed = "the reply was cut at the output limit" if reply.truncated else None
        parsed = parsed or parse_analysis(reply.text)
        if isinstance(parsed, str):
            self.errors.append(f"unusable analysis: {parsed}")
            status = "truncated" if reply.truncated else "unparsable"
            note(LLMCall.of_reply("analyst", reply, status, parsed, subject))
            return replace(verdict, **cost)
        note(LLMCall.of_reply("analyst", reply, subject=subject))
        return replace(parsed, **cost)


def _render(profile: Profile, work: Work | str, peaks: Peaks | None, figures: Any, title: str,
            precision: str) -> bytes:  # fmt: skip
    try:
        from kforge_search.analysis.plot import render
    except ImportError:  # matplotlib missing: text only
        return b""
    return render(profile, work, peaks, figures, title, precision)


def problem_work(problem: Problem) -> Work | str:
    """The work of the builtin synthesizer's traced graph where it can express the problem
    (GEMMs, tail operations, inputs + parameters + output once each), else torch's count."""
    from kforge_search.agents.builtin.agent import analyze
    from kforge_search.agents.builtin.ir import Unsupported

    plan = analyze(problem)
    if isinstance(plan, Unsupported):
        return counted_work(problem)
    work = plan.graph.work
    return Work(work.flops, work.min_bytes, "traced")
