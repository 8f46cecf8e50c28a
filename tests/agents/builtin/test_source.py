"""Standalone candidates: what the builtin synthesizer copies from a problem refers to no
name of the problem's module. `super(Model, self)` and `Model.attr` become ModelNew's; the
helpers, helper classes and constants the copied code reads come along, with what they read
in turn, in source order. Problems in KernelBench's published style (tests/fixtures/published)
give drafts that pass the static check and verify; every published KernelBench file gives a
ModelNew whose parameters and buffers are Model's."""

from __future__ import annotations

import ast
import re
import types
from pathlib import Path

import pytest
import torch

from kforge_search.agents.base import Context, Draft
from kforge_search.agents.builtin import BuiltinAgent
from kforge_search.agents.builtin.source import ModelSource, model_source
from kforge_search.evaluator.free_names import free_names
from kforge_search.evaluator.static_check import excused_names, static_check
from kforge_search.platforms import get_platform
from kforge_search.problem import load_problem
from tests.conftest import ROOT

PUBLISHED = sorted((ROOT / "tests" / "fixtures" / "published").glob("*.py"))
KERNELBENCH = ROOT.parent / "shared" / "kernelbench"


def module_text(ms: ModelSource) -> str:
    """A candidate module around what the renderers take from model_source."""
    return (
        f"import torch\nimport torch.nn as nn\n{ms.imports}\n\n\n{ms.helpers}\n\n\n"
        f"class ModelNew({ms.bases}):\n{ms.methods}\n\n"
        f"    def forward(self, {ms.forward_args}):\n        return None\n"
    )


def load(text: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(text, name, "exec"), module.__dict__)
    return module


def same_state(source: str, name: str) -> None:
    """ModelNew(*get_init_inputs()) built from the copy, standalone, has Model's state."""
    problem = load(source, f"{name}-problem")
    candidate = load(module_text(model_source(source)), f"{name}-candidate")
    init = problem.get_init_inputs()
    torch.manual_seed(7)
    expected = problem.Model(*init).state_dict()
    torch.manual_seed(7)
    actual = candidate.ModelNew(*init).state_dict()
    assert list(actual) == list(expected)
    assert all(torch.equal(actual[k], expected[k]) for k in expected)


PUBLISHED_STYLE = '''
import math
import torch
import torch.nn as nn

SCALE = 2
WIDTH = SCALE * 8
shape = (WIDTH, WIDTH // SCALE)
unused = 12


def init_weight(w):
    with torch.no_grad():
        return w.mul_(_gain())


def _gain():
    return 1.0 / math.sqrt(WIDTH)


class Block(nn.Module):
    def __init__(self, n):
        super(Block, self).__init__()
        self.lin = nn.Linear(n, shape[1])


EPS = 1e-5
DIM = -1


class Model(nn.Module):
    """A docstring."""
    kinds = ("a", "b")
    size = len(kinds) * SCALE

    def __init__(self, n, eps=EPS):
        super(Model, self).__init__()
        self.block = Block(n)
        init_weight(self.block.lin.weight)
        self.eps = eps
        self.width = Model.size + self.helper()

    def helper(self):
        return super(Model, self).__class__.__name__.__len__()

    def forward(self, x, dim: int = DIM):
        return self.block.lin(x).sum(dim)


def get_inputs():
    return [torch.rand(4, 3)]


def get_init_inputs():
    return [3]
'''


def test_model_references_become_modelnew_and_needed_definitions_come_along():
    ms = model_source(PUBLISHED_STYLE)
    assert "Model" not in ms.methods.replace("ModelNew", "")
    assert "super(ModelNew, self).__init__()" in ms.methods
    assert "ModelNew.size" in ms.methods and "kinds = ('a', 'b')" in ms.methods
    assert "A docstring" not in ms.methods and "def forward" not in ms.methods
    assert ms.forward_args == "x, dim: int=DIM"
    helpers = [ast.unparse(n).split("\n")[0] for n in ast.parse(ms.helpers).body]
    assert helpers == [  # in source order, with what they need: WIDTH needs SCALE, ...
        "SCALE = 2",
        "WIDTH = SCALE * 8",
        "shape = (WIDTH, WIDTH // SCALE)",
        "def init_weight(w):",
        "def _gain():",
        "class Block(nn.Module):",
        "EPS = 1e-05",
        "DIM = -1",
    ]
    assert "super(Block, self)" in ms.helpers  # a helper class keeps its own name
    assert ms.imports == "import math"
    assert not free_names(ast.parse(module_text(ms))).names
    same_state(PUBLISHED_STYLE, "published-style")


def test_a_future_import_is_not_carried_into_the_middle_of_a_candidate():
    source = "from __future__ import annotations\n" + PUBLISHED_STYLE
    assert "__future__" not in model_source(source).imports


@pytest.mark.parametrize("path", PUBLISHED, ids=lambda p: p.stem)
@pytest.mark.parametrize("platform", ["cpu-triton", "cpu-cpp"])
def test_builtin_drafts_of_published_style_problems_are_self_contained(path, platform):
    problem = load_problem(path)
    drafts = BuiltinAgent().propose(Context(problem, get_platform(platform), "strict"))
    assert drafts and all(isinstance(d, Draft) for d in drafts)
    for draft in drafts:
        assert not re.search(r"\bModel\b", draft.source)
        check = static_check(draft.source, get_platform(platform).language)
        assert check.ok, check.message


@pytest.mark.parametrize("path", PUBLISHED, ids=lambda p: p.stem)
def test_builtin_drafts_of_published_style_problems_verify(verify, path):
    problem = load_problem(path)
    (draft,) = BuiltinAgent().propose(Context(problem, get_platform("cpu-triton"), "strict"))
    result = verify(draft.source, problem)
    assert result.ok, result.message


def _kernelbench(*levels: str) -> list[Path]:
    return sorted(p for level in levels for p in (KERNELBENCH / level).glob("*.py"))


needs_kernelbench = pytest.mark.skipif(
    not KERNELBENCH.is_dir(), reason="KernelBench's published files are not in ../shared"
)


@needs_kernelbench
def test_every_published_file_gives_a_self_contained_modelnew():
    files = _kernelbench("level1", "level2", "level3")
    assert len(files) > 200
    for path in files:
        source = path.read_text()
        found = free_names(ast.parse(module_text(model_source(source))))
        left = set(found.free) - excused_names(source)  # the file's own dead branches
        assert found.decided and not left, f"{path.name}: {sorted(left)}"


@needs_kernelbench
def test_published_level1_and_level2_modelnew_builds_model_state():
    for path in _kernelbench("level1", "level2"):
        same_state(path.read_text(), path.stem)


def test_a_draft_carries_the_constants_at_the_problem_s_sizes(verify):
    """The copy of Model reads module constants (`bias_shape = (out_features,)`): a draft for
    the problem at other sizes carries those sizes' values, as Model reads them there."""
    problem = load_problem(PUBLISHED[0], overrides={"out_features": 20})
    assert PUBLISHED[0].stem == "gemm_helper_bias_scale"
    (draft,) = BuiltinAgent().propose(Context(problem, get_platform("cpu-triton"), "strict"))
    assert "out_features = 20" in draft.source and "bias_shape = (out_features,)" in draft.source
    result = verify(draft.source, problem)
    assert result.ok, result.message
