"""A candidate module out of a model's reply: fenced blocks, several blocks, prose around.

The rule: among the fenced code blocks (```python, ```py or bare ```), the last one that
defines `class ModelNew` is the candidate; if ModelNew's block is not a whole module but the
blocks together are (kernels in one block, ModelNew in the next), their concatenation is. A
reply without fences that parses as Python and defines ModelNew is taken whole. Anything else
is a `NoModule` whose reason is fed back to the model as a functional-pass error.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from kforge_search import pysource

FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
CODE_LANGS = {"", "python", "py", "python3"}


@dataclass(frozen=True)
class Module:
    source: str


@dataclass(frozen=True)
class NoModule:
    reason: str  # what was wrong, for the next prompt


def _defines_model_new(source: str) -> bool | None:
    """True/False when the source parses; None when it does not."""
    try:
        tree = pysource.parse(source)
    except SyntaxError:
        return None
    return any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)


def _top_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _defines_what_uses(block: str, user: str) -> bool:
    """Whether `block` defines a top-level name that `user` uses but does not define (a
    kernel in one block, the ModelNew that launches it in another)."""
    try:
        defined, used_tree = _top_names(pysource.parse(block)), pysource.parse(user)
    except SyntaxError:
        return False
    used = {n.id for n in ast.walk(used_tree) if isinstance(n, ast.Name)}
    return bool((defined & used) - _top_names(used_tree))


def extract(reply: str) -> Module | NoModule:
    blocks = [body for lang, body in FENCE.findall(reply) if lang.lower() in CODE_LANGS]
    if not blocks:
        if _defines_model_new(reply):
            return Module(reply.strip() + "\n")
        return NoModule(
            "the reply has no ```python code block with a ModelNew class: reply with the whole "
            "module in one fenced python block"
        )
    for at in range(len(blocks) - 1, -1, -1):
        if _defines_model_new(blocks[at]):
            needed = [b for b in blocks[:at] if _defines_what_uses(b, blocks[at])]
            return Module("\n\n".join(b.strip() for b in [*needed, blocks[at]]) + "\n")
    joined = "\n\n".join(b.strip() for b in blocks)
    if _defines_model_new(joined):
        return Module(joined + "\n")
    if any("class ModelNew" in b for b in blocks):
        return NoModule(
            "the code block with ModelNew is not valid Python (a syntax error, or cut off): "
            "reply with the whole module, complete, in one block"
        )
    return NoModule(
        "no code block defines `class ModelNew(nn.Module)`: define it, with the reference "
        "Model's constructor arguments, and run your kernels in its forward"
    )
