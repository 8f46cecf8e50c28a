"""The builtin synthesizer: traces the reference with torch.fx, plans fused kernels and
renders them from Jinja2 templates; its genome (tiles, warps, stages, precision) is what the
search evolves. No LLM."""

from kforge_search.agents.builtin.agent import BuiltinAgent, analyze, seed_genome
from kforge_search.agents.builtin.genome import (
    CppGenome,
    Genome,
    TritonGenome,
    crossover,
    mutate,
)

__all__ = [
    "BuiltinAgent",
    "CppGenome",
    "Genome",
    "TritonGenome",
    "analyze",
    "crossover",
    "mutate",
    "seed_genome",
]
