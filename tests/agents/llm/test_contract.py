"""The contract the LLM agent's system prompt states, for every platform: a self-contained
module (no reference to Model or the problem's module) and training-mode buffers."""

from __future__ import annotations

import pytest

from kforge_search import prompts
from kforge_search.agents.llm.agent import guide_key
from kforge_search.platforms import PLATFORMS


@pytest.mark.parametrize("platform", sorted(PLATFORMS.values(), key=lambda p: p.name),
                         ids=lambda p: p.name)  # fmt: skip
def test_the_system_prompt_asks_for_a_self_contained_module(platform):
    guide = prompts.render(f"guides/{guide_key(platform)}.j2")
    text = " ".join(
        prompts.render("system.j2", platform=platform, policy="strict", guide=guide).split()
    )
    assert "self-contained" in text and "must not refer to `Model`" in text
    assert "`super().__init__()`, not `super(Model, self).__init__()`" in text
    assert "helper function, helper class and constant" in text
    assert "training mode" in text and "running_mean, running_var and num_batches_tracked" in text
