"""argmax / argmin in one walk over the input (arg_walk.arg_pairs): each lane's best
value and its index, then a packed key of the value's ordered bits and the index per lane.
The IR's two statistics read the input twice (H200, 51_Argmax 4.6 ms where a sum over the
same input took 2.15); a key per element left it at 0.65x of compile. Here, on Triton's
interpreter,
the one walk gives torch's indices exactly where the keys could go wrong: ties (the first
index wins), -0 beside +0, NaN (torch's argmax and argmin both take the first NaN),
all-negative rows, over the columns (a row pass) and over a middle dim (a column pass)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kforge_search.agents.builtin import BuiltinAgent, TritonGenome
from kforge_search.platforms import get_platform
from kforge_search.problem import load_problem
from tests.agents.builtin.harness import load_candidate
from tests.agents.builtin.test_families_gpu import problem_source

AGENT = BuiltinAgent()
GENOME = TritonGenome(block_m=16, block_n=64, pass_block=64)  # several chunks per row


def _model_new(tmp_path: Path, forward: str, shape: tuple[int, ...]):
    path = tmp_path / "p.py"
    path.write_text(problem_source(forward, f"[torch.randn{shape}]"))
    draft = AGENT.synthesize(load_problem(path), get_platform("cpu-triton"), GENOME, "test")
    assert not hasattr(draft, "message"), draft
    assert "_done(key, axis=" in draft.source  # one walk, not a statistic and then an index
    # keys of the lanes' bests, after the walk (a column pass: its held tile's and its walk's)
    paths = 2 if "ONE: tl.constexpr" in draft.source else 1
    assert draft.source.count("key = ") == 4 * paths
    return load_candidate(draft.source, tmp_path / "candidate.py")()


def _hard(shape: tuple[int, ...], dim: int) -> torch.Tensor:
    """Rows (along `dim`) with ties, signed zeros, NaN, only negative values and only
    infinities (where no lane takes an element after its start)."""
    torch.manual_seed(0)
    x = torch.randn(shape)
    x = x.movedim(dim, -1).contiguous()
    n = x.shape[-1]
    flat = x.reshape(-1, n)
    flat[0] = 0.0  # all +0: the first index
    flat[1, :] = -0.0
    flat[1, n // 2] = 0.0  # -0 equals +0 for torch: the first index still
    flat[2] = -flat[2].abs() - 1.0  # all negative
    flat[3, 5] = flat[3, n - 7] = flat[3].max() + 1.0  # a tie of two maxima
    flat[4, 9] = flat[4, n - 3] = flat[4].min() - 1.0  # a tie of two minima
    flat[5, n - 2] = float("nan")
    flat[5, n - 9] = float("nan")
    flat[6, :] = 3.0  # every element equal
    flat[7, 1] = float("inf")
    flat[7, 2] = float("-inf")
    flat[8, :] = float("-inf")  # every lane keeps its start: index 0 for argmax
    flat[9, :] = float("inf")  # ... and for argmin
    flat[10, : n // 2] = float("-inf")  # lanes that never take beside one that does
    flat[10, n // 2 :] = float("inf")
    return flat.reshape(x.shape).movedim(-1, dim).contiguous()


@pytest.mark.parametrize("fn", ["argmax", "argmin"])
@pytest.mark.parametrize(
    ("dim", "shape"),
    [(-1, (11, 517)), (1, (3, 131, 37)), (1, (4, 37, 129))],  # 37 rows: one tile (ONE)
)
def test_one_walk_gives_torchs_index_on_hard_rows(verify, tmp_path, fn, dim, shape):
    model = _model_new(tmp_path, f"return torch.{fn}(x, dim={dim})", shape)
    x = _hard(shape, dim)
    got = model(x)
    want = getattr(torch, fn)(x, dim=dim)
    assert got.dtype == torch.int64
    assert torch.equal(got, want), (got - want).nonzero()[:5]


def test_an_index_beside_its_statistic_verifies(verify, tmp_path):
    """argmax and the maximum both outputs of the pass: each as torch has them."""
    path = tmp_path / "p.py"
    forward = "return torch.argmax(x, dim=-1) + torch.max(x, dim=-1).values"
    path.write_text(problem_source(forward, "[torch.randn(5, 517)]"))
    problem = load_problem(path)
    draft = AGENT.synthesize(problem, get_platform("cpu-triton"), GENOME, "test")
    assert not hasattr(draft, "message"), draft
    result = verify(draft.source, problem)
    assert result.ok, result.message


@pytest.mark.parametrize(
    ("fn", "dim", "shape"),
    [("argmax", 1, (3, 131, 37)), ("argmin", -1, (9, 517)), ("argmax", 1, (4, 37, 129))],
)
def test_the_one_walk_compiles_for_sm90(tmp_path, fn, dim, shape):
    """The keys' int64 arithmetic and bit casts compile for an H100, where the interpreter's
    loose typing does not apply."""
    from tests.agents.builtin.test_gpu_compile import compile_for_h100

    path = tmp_path / "p.py"
    path.write_text(problem_source(f"return torch.{fn}(x, dim={dim})", f"[torch.randn{shape}]"))
    report = compile_for_h100(load_problem(path), "strict", tmp_path, GENOME)
    assert ": ok" in report and "error" not in report.lower(), report
    if shape[1] <= 64 and dim == 1:  # the column pass's held tile (ONE), compiled too
        held = compile_for_h100(load_problem(path), "strict", tmp_path, GENOME, sets=("ONE=True",))
        assert "_cols: ok" in held and "FAILED" not in held, held
