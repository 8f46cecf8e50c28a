"""Screening: time many genomes of the builtin synthesizer in this process, before the
evaluator sees the few fastest.

A full evaluation costs several child processes (reference, verification at two sizes,
timing, baselines): tens of seconds on a GPU, most of it not on the GPU. Our own
synthesized kernels need none of the evaluator's defences to be *ranked*, so a screen
imports each genome's draft here, runs it on the problem's inputs and times it with the
evaluator's own timing methods (CUDA events with an L2 flush, or perf_counter), a few runs
each. Its times only order genomes: every number that is reported comes from the evaluator,
which verifies and times the screened winners in its own processes. Only builtin drafts are
screened; an LLM's source never runs outside the evaluator.
"""

from __future__ import annotations

import dataclasses
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kforge_search.agents.base import Draft
from kforge_search.agents.builtin import genome as gen
from kforge_search.agents.builtin.genome import Genome
from kforge_search.agents.builtin.ir import Unsupported
from kforge_search.evaluator.devicelock import holding
from kforge_search.problem import Problem, exec_problem

if TYPE_CHECKING:
    from kforge_search.agents.builtin.agent import BuiltinAgent
    from kforge_search.platforms import Platform


@dataclass(frozen=True)
class Screened:
    genome: Genome
    p50_ms: float | None  # None when it failed to build or run
    error: str = ""


def neighbourhood(
    seed: Genome, among: frozenset[str], policy: str, limit: int, rng: random.Random
) -> list[Genome]:
    """The seed, every genome one relevant gene away from it, then random two-gene mutants;
    repaired, without repeats, at most `limit`."""
    found: dict[Genome, None] = {seed: None}
    space = gen.space(seed, policy)
    for name in sorted(among & set(space)):
        for value in space[name]:
            found.setdefault(gen.repair(dataclasses.replace(seed, **{name: value}), policy))
    for _ in range(20 * limit):
        if len(found) >= limit:
            break
        found.setdefault(gen.mutate(seed, policy, rng, genes=2, among=among))
    genomes = list(found)
    head, rest = genomes[:1], genomes[1:]
    rng.shuffle(rest)  # when the one-gene changes alone exceed the limit, a fair share of each
    return (head + rest)[:limit]


def _problem_inputs(problem: Problem, device: str) -> tuple[Any, list[Any]]:
    """The problem's module and its inputs (seed 0) on the device."""
    import torch

    module = exec_problem(problem)
    torch.manual_seed(0)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    return module, inputs


def screen(
    agent: BuiltinAgent,
    problem: Problem,
    platform: Platform,
    genomes: list[Genome],
    runs: int = 10,
    warmup: int = 3,
) -> list[Screened]:
    """Each genome's p50 over `runs` in this process, fastest first (failures last)."""
    import torch

    from kforge_search.evaluator.build import cache_cpp_builds, load_candidate_class
    from kforge_search.evaluator.model_run import synchronize
    from kforge_search.evaluator.timing import METHODS, capture_clocks
    from kforge_search.paths import cache_dir

    if not platform.timing_meaningful:
        raise ValueError(f"{platform.name} times are not meaningful: nothing to screen")
    cache_cpp_builds(cache_dir() / "torch_extensions")
    device = "cuda" if platform.device_kind == "cuda" else "cpu"
    module, inputs = _problem_inputs(problem, device)
    clocks, timer = capture_clocks(device), METHODS[platform.timing]
    results: list[Screened] = []
    with tempfile.TemporaryDirectory(prefix="kforge-screen-") as tmp, torch.no_grad():
        work = Path(tmp)
        for i, genome in enumerate(genomes):
            draft = agent.synthesize(problem, platform, genome, "screened")
            if isinstance(draft, Unsupported):
                raise ValueError(draft.message)
            try:
                path = work / f"screen_{i}.py"
                path.write_text(draft.source)
                cls = load_candidate_class(str(path), f"kforge_screen_{i}_{id(work)}")
                model = cls(*module.get_init_inputs()).to(device)
                with holding(device, exclusive=False):  # compiled beside others' work,
                    model(*inputs)
                    synchronize(device)
                with holding(device, exclusive=True):  # timed alone (devicelock.py)
                    timing = timer(lambda m=model: m(*inputs), clocks, warmup, runs)
                results.append(Screened(genome, timing.p50_ms))
            except Exception as exc:  # a genome that fails is screened out, not fatal
                results.append(Screened(genome, None, f"{type(exc).__name__}: {exc}"[:300]))
            finally:
                if device == "cuda":
                    torch.cuda.empty_cache()
    return sorted(results, key=lambda s: (s.p50_ms is None, s.p50_ms or 0.0))


def screened_drafts(
    agent: BuiltinAgent,
    problem: Problem,
    platform: Platform,
    policy: str,
    count: int,
    keep: int,
    seed: int = 0,
) -> tuple[list[Draft], list[Screened]]:
    """Screen `count` genomes around the seed genome; drafts of the `keep` fastest that ran."""
    from kforge_search.agents.builtin.agent import relevant_genes, seed_genome

    plan = agent.plan(problem)
    if isinstance(plan, Unsupported):
        raise ValueError(plan.message)
    start = seed_genome(plan, platform, policy)
    rng = random.Random(f"screen:{seed}")
    genomes = neighbourhood(start, relevant_genes(plan, start), policy, count, rng)
    ranked = screen(agent, problem, platform, genomes)
    drafts: list[Draft] = []
    for rank, item in enumerate(ranked[:keep], 1):
        if item.p50_ms is None:
            break
        note = (
            f"screened {rank} of {len(ranked)} genomes in-process (p50 {item.p50_ms:.4f} ms): "
            + ("the seed genome" if item.genome == start else gen.describe(item.genome))
        )
        draft = agent.synthesize(problem, platform, item.genome, note)
        assert not isinstance(draft, Unsupported)
        drafts.append(draft)
    return drafts, ranked


def time_reference(problem: Problem, platform: Platform, runs: int = 10, warmup: int = 3) -> float:
    """The reference Model's p50 in this process, timed as `screen` times genomes."""
    import torch

    from kforge_search.evaluator.timing import METHODS, capture_clocks

    device = "cuda" if platform.device_kind == "cuda" else "cpu"
    module, inputs = _problem_inputs(problem, device)
    model = module.Model(*module.get_init_inputs()).to(device)
    with torch.no_grad(), holding(device, exclusive=True):
        timed = METHODS[platform.timing](
            lambda: model(*inputs), capture_clocks(device), warmup, runs
        )
    return timed.p50_ms


class GenomeOracle:
    """Genome -> p50 ms by `screen`, each genome timed once (None when it fails)."""

    def __init__(self, agent: BuiltinAgent, problem: Problem, platform: Platform):
        self.agent, self.problem, self.platform = agent, problem, platform
        self.times: dict[Genome, float | None] = {}

    def __call__(self, genome: Genome) -> float | None:
        if genome not in self.times:
            (item,) = screen(self.agent, self.problem, self.platform, [genome])
            self.times[genome] = item.p50_ms
        return self.times[genome]
