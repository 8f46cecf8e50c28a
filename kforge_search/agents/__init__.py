"""Agents that write candidate kernels: the shared interface and the builtin synthesizer."""

from kforge_search.agents.base import Agent, Context, Draft, Parent, Reference, Support
from kforge_search.agents.builtin import BuiltinAgent, analyze, seed_genome
from kforge_search.agents.genome import CppGenome, Genome, TritonGenome, crossover, mutate

__all__ = [
    "Agent",
    "BuiltinAgent",
    "Context",
    "CppGenome",
    "Draft",
    "Genome",
    "Parent",
    "Reference",
    "Support",
    "TritonGenome",
    "analyze",
    "crossover",
    "mutate",
    "seed_genome",
]
