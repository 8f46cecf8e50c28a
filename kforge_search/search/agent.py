"""What the search needs of an agent: `propose(context)` returning drafts with a source.

A structural protocol, so the search depends on no agent implementation (the builtin
synthesizer and LLM agents live in `kforge_search.agents`); tests pass tiny doubles.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Draft(Protocol):
    """A proposed candidate: at least its Python source."""

    @property
    def source(self) -> str: ...


@runtime_checkable
class Agent(Protocol):
    """Writes candidate kernels for a context (problem, platform, parents, references)."""

    def propose(self, context: Any) -> Sequence[Draft]: ...
