"""Getting the candidate module out of realistic replies."""

from __future__ import annotations

from kforge_search.llm.parse import Module, NoModule, extract

GOOD = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


def test_prose_around_one_fenced_block():
    reply = f"Here is the fused kernel.\n\n```python\n{GOOD}```\n\nIt saves one pass."
    assert extract(reply) == Module(GOOD)


def test_the_last_block_with_model_new_wins_over_earlier_drafts_and_shell_blocks():
    old = GOOD.replace("pass", "x = 1")
    reply = f"```py\n{old}```\nBetter:\n```python\n{GOOD}```\n```bash\npip install x\n```"
    assert extract(reply) == Module(GOOD)


def test_kernels_and_model_new_in_separate_blocks_are_joined():
    kernel = "def helper():\n    return 1\n"
    uses = GOOD.replace("pass", "def forward(self, x):\n        return helper()")
    reply = f"The kernel:\n```python\n{kernel}```\nThe module:\n```python\n{uses}```"
    out = extract(reply)
    assert isinstance(out, Module) and "def helper" in out.source and "class ModelNew" in out.source
    # a block ModelNew does not use is left out
    assert extract(f"```python\n{kernel}```\n```python\n{GOOD}```") == Module(GOOD)


def test_an_unfenced_module_and_an_unclosed_fence():
    assert extract(GOOD) == Module(GOOD)
    assert extract(f"```python\n{GOOD}") == Module(GOOD)


def test_replies_without_a_usable_module_say_why():
    assert "no ```python code block" in extract("I cannot do that.").reason
    cut = extract("```python\nclass ModelNew(nn.Module):\n    def forward(self, x:\n```")
    assert isinstance(cut, NoModule) and "not valid Python" in cut.reason
    other = extract("```python\nclass Model:\n    pass\n```")
    assert isinstance(other, NoModule) and "class ModelNew" in other.reason
