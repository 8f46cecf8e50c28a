"""Agents that write candidate kernels. `base` is the interface every agent implements;
`builtin/` is the synthesizer (no LLM), `llm/` the generation and analysis agents."""

from kforge_search.agents.base import Agent, Context, Draft, Parent, Reference, Support

__all__ = ["Agent", "Context", "Draft", "Parent", "Reference", "Support"]
