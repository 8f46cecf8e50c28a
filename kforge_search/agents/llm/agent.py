"""The LLM generation agent: the prompt for a context (functional pass until a draft
verifies, optimization passes after), one model call, the candidate module parsed out.

Prompts come only from prompts/*.j2 (StrictUndefined). A reply without a usable ModelNew
still becomes a draft (its text as the source, the parse failure as its note): the
evaluator's static check rejects it, and the next functional-pass prompt shows the model
both the rejection and why the reply could not be used. A reply cut at the output limit is
not evaluated: the model is asked once more for a shorter reply (prompts/shorter.j2). Every
call, ok or failed, is noted in the journal (llm/calls.py: status, attempts, latency, tokens,
cost, why it failed) and reported to `on_call` when it got a reply. Calls run on the
process's shared event loop (llm/loop.py), so lineages in threads wait for theirs together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kforge_search import prompts
from kforge_search.agents.base import SERIAL, Context, Draft, Parent, Reference, Support
from kforge_search.agents.llm.analyst import Analyst, Report
from kforge_search.llm import loop
from kforge_search.llm.calls import LLMCall, note
from kforge_search.llm.config import LLMConfig, LLMError, Message, Reply
from kforge_search.llm.parse import Module, extract
from kforge_search.llm.providers import Provider
from kforge_search.platforms import Platform
from kforge_search.problem import Problem

LOG_CHARS = 6000  # of a compiler log or traceback: the tail, where the error is


def guide_key(platform: Platform) -> str:
    """prompts/guides/<key>.j2 and prompts/oneshot/<key>.txt for the platform's language."""
    return platform.language.replace("-", "_")


def _tail(text: str, chars: int = LOG_CHARS) -> str:
    return text if len(text) <= chars else "[...]\n" + text[-chars:]


def _once(message: str, log: str) -> str:
    """The message without what the log shows anyway (a build error's message often holds
    the whole compiler output): each text reaches the prompt once."""
    if not log:
        return message
    body = log.strip()
    if body and body in message:
        message = message.replace(body, "(see the log below)")
    kept = [
        line
        for line in message.splitlines()
        if len(line.strip()) < 40 or line.strip() not in log  # long lines the log repeats
    ]
    return "\n".join(kept).strip()


def _previous(parent: Parent) -> dict[str, Any]:
    result, draft = parent.result, parent.draft
    artifacts = result.artifacts
    log = artifacts.compile_log or artifacts.traceback
    message = _once(result.message, log)
    message += f" ({draft.note})" if draft.note.startswith("unusable") else ""
    return {
        "source": draft.source,
        "status": result.status.value,
        "stage": result.stage,
        "message": message,
        "compile_log": _tail(log),
        "mismatch": str(artifacts.mismatch) if artifacts.mismatch else "",
    }


def digest(parent: Parent) -> str:
    """The rule-based profile digest of an evaluated draft (the analysis agent adds to it)."""
    result = parent.result
    lines = []
    if result.timing is not None:
        t = result.timing
        lines.append(
            f"- time per call: p20 {t.p20_ms:.4f} / p50 {t.p50_ms:.4f} / p80 {t.p80_ms:.4f} ms "
            f"({t.method}, {t.runs} runs); host {t.host_p50_ms:.4f} ms"
        )
    for kind in ("eager", "compile"):
        if (s := result.speedup(kind)) is not None:
            lines.append(f"- {s:.2f}x vs PyTorch {kind}")
    if parent.profile:
        lines.append(parent.profile)
    return "\n".join(lines)


SUPERVISION = ("auto", "reference-free", "cross-platform", "one-shot")


def supervised(
    supervision: str, platform: Platform, references: tuple[Reference, ...], oneshot: str
) -> tuple[str, tuple[Reference, ...]]:
    """The one-shot example and references a functional-pass prompt shows: auto (references
    when offered, else the one-shot example), reference-free (neither), cross-platform (only
    kernels of other platforms), one-shot (the example, no references)."""
    if supervision == "reference-free":
        return "", ()
    if supervision == "one-shot":
        return oneshot, ()
    if supervision == "cross-platform":
        return "", tuple(r for r in references if r.platform != platform.name)
    return ("" if references else oneshot), references


class LLMAgent:
    """Give it a provider, or an LLMConfig (the provider is then made on first use, so the
    agent can travel to a lineage actor and open its connection there). The analyst reads
    the best kernel's profile before each optimization pass: by default the same model
    (`analyst=None`), or the one given; without a profile the digest has only the timing."""

    name = "llm"
    concurrent = True  # proposals may overlap: the analyst takes SERIAL for its rules

    def __init__(
        self,
        provider: Provider | LLMConfig,
        on_call: Callable[[Reply], None] | None = None,
        cache_dir: str | None = None,
        analyst: Analyst | None = None,
        supervision: str = "auto",
    ):
        if supervision not in SUPERVISION:
            raise ValueError(f"supervision {supervision!r}: use one of {', '.join(SUPERVISION)}")
        self._config = provider if isinstance(provider, LLMConfig) else None
        self._provider = None if isinstance(provider, LLMConfig) else provider
        self.on_call = on_call
        self.cache_dir = cache_dir
        self.supervision = supervision
        self._analyst = analyst
        self._reports: dict[str, Report] = {}  # best draft id -> its analysis
        self.errors: list[str] = []  # calls that failed after the SDK's retries

    @property
    def provider(self) -> Provider:
        with SERIAL:  # lineages in threads share the agent: one client, made once
            if self._provider is None:
                assert self._config is not None
                from kforge_search.llm.cache import ReplyCache
                from kforge_search.llm.providers import make_provider

                cache = ReplyCache(self.cache_dir) if self.cache_dir else None
                self._provider = make_provider(self._config, cache=cache)
            return self._provider

    @property
    def analyst(self) -> Analyst:
        with SERIAL:
            if self._analyst is None:
                self._analyst = Analyst(self.provider, on_call=self.on_call)
            return self._analyst

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self._config is not None:  # an SDK client does not pickle: made again there
            state["_provider"] = None
            if self._analyst is not None and self._analyst.shares(self._provider):
                state["_analyst"] = None
        return state

    def supports(self, problem: Problem, platform: Platform) -> Support:
        return Support(True)

    def system(self, context: Context) -> str:
        guide = prompts.render(f"guides/{guide_key(context.platform)}.j2")
        return prompts.render(
            "system.j2", platform=context.platform, policy=context.policy, guide=guide
        )

    @staticmethod
    def best(context: Context) -> Parent | None:
        good = [p for p in context.parents if p.result.ok and p.p50_ms is not None]
        return min(good, key=lambda p: p.p50_ms or 0.0) if good else None

    def report(self, context: Context) -> tuple[Report | None, bool]:
        """The analysis of the best verified parent (made once per parent) and whether it was
        made just now."""
        best = self.best(context)
        if best is None or best.result.profile is None:
            return None, False
        if best.draft.id in self._reports:
            return self._reports[best.draft.id], False
        report = self.analyst.report(
            context.problem, context.platform, context.policy, best, context.left
        )
        if isinstance(report, str):
            return None, False
        self._reports[best.draft.id] = report
        return report, True

    def prompt(self, context: Context, report: Report | None = None) -> str:
        refs = tuple(context.references)
        best = self.best(context)
        if best is not None:
            both = (best.result.speedup("eager"), best.result.speedup("compile"))
            known = [s for s in both if s]
            _, refs = supervised(self.supervision, context.platform, refs, "")
            return prompts.render(
                "optimize.j2",
                platform=context.platform,
                budget=context.left,
                problem_source=context.problem.source,
                best={
                    "source": best.draft.source,
                    "p50_ms": best.p50_ms,
                    "speedup": min(known) if known else None,
                },
                digest="\n".join(filter(None, [digest(best), report.digest if report else ""])),
                analysis=report.analysis.text() if report else "",
                references=refs,
            )
        oneshot, refs = supervised(
            self.supervision, context.platform, refs, prompts.oneshot(guide_key(context.platform))
        )
        return prompts.render(
            "functional.j2",
            platform=context.platform,
            budget=context.left,
            problem_source=context.problem.source,
            oneshot=oneshot,
            references=refs,
            previous=_previous(context.parents[-1]) if context.parents else None,
        )

    def propose(self, context: Context) -> list[Draft]:
        if context.budget == 0:
            return []
        try:
            report, fresh = self.report(context)
        except LLMError:  # no client (a missing key): the writer's call below notes why
            report, fresh = None, False
        system, prompt = self.system(context), self.prompt(context, report)
        reply = self._ask(system, prompt)
        if reply is not None and reply.truncated:  # not evaluated: asked again, shorter
            self._truncated(reply, "asked again for a shorter reply")
            shorter = prompts.render(
                "shorter.j2", tokens_out=reply.tokens_out, max_tokens=self._max_tokens()
            )
            reply = self._ask(system, f"{prompt}\n\n{shorter}")
            if reply is not None and reply.truncated:
                self._truncated(reply, "twice: this step proposes nothing")
                return []
        if reply is None:  # failed after the SDK's retries: this step proposes nothing
            return []
        parsed = extract(reply.text)
        best = self.best(context)
        parents = (best.draft.id,) if best is not None else ()
        cost = {
            "parents": parents or tuple(p.draft.id for p in context.parents[-1:]),
            "model": reply.model,
            "tokens_in": reply.tokens_in,
            "tokens_out": reply.tokens_out,
            "cost_usd": reply.cost_usd,
            "analysis": report.analysis if report and fresh else None,
        }
        platform = context.platform.name
        if isinstance(parsed, Module):
            note(LLMCall.of_reply("writer", reply, subject=parsed.source))
            text = f"{reply.model}: {len(reply.text)} chars, {reply.tokens_out} tokens out"
            return [Draft(parsed.source, platform, self.name, text, **cost)]
        note(LLMCall.of_reply("writer", reply, "unparsable", parsed.reason, reply.text))
        return [Draft(reply.text, platform, self.name, f"unusable reply: {parsed.reason}", **cost)]

    def _ask(self, system: str, prompt: str) -> Reply | None:
        """One call (the SDK retries inside it); a failure is noted and gives None."""
        model = self._config.model if self._config is not None else "?"
        try:
            provider = self.provider
            model = provider.config.model
            reply = loop.run(provider.complete(system, [Message("user", prompt)]))
        except LLMError as exc:
            self.errors.append(f"{exc.kind}: {exc}")
            note(LLMCall.of_error("writer", model, exc))
            return None
        if self.on_call is not None:
            self.on_call(reply)
        return reply

    def _max_tokens(self) -> int:
        config = self._config or getattr(self._provider, "config", None)
        return config.max_tokens if config is not None else 0

    def _truncated(self, reply: Reply, then: str) -> None:
        why = (
            f"the reply was cut at the output limit ({reply.tokens_out} tokens; "
            f"--max-output-tokens {self._max_tokens()}): {then}"
        )
        self.errors.append(f"truncated: {why}")
        note(LLMCall.of_reply("writer", reply, "truncated", why))
