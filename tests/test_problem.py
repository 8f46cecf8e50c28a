from __future__ import annotations

import pytest

from kforge_search.problem import (
    ProblemError,
    find_problems,
    load_problem,
    normalize_source,
    parse_problem,
    resolve_problem,
)
from tests.conftest import PROBLEMS, ROOT

SOURCE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.n = n

    def forward(self, x):
        return x * self.n

batch_size = 128
dim = 64
hidden = dim * 4  # derived: follows overrides of dim
KFORGE_SIZES = {"ci": {"batch_size": 4}}

def get_inputs():
    return [torch.randn(batch_size, hidden)]

def get_init_inputs():
    return [3]
"""


def test_id_is_a_hash_of_the_normalized_source():
    a = parse_problem(SOURCE, "a.py", "a")
    reformatted = SOURCE.replace("batch_size = 128", "batch_size   =   128  # comment")
    assert parse_problem(reformatted, "b.py", "b").id == a.id
    changed = SOURCE.replace("batch_size = 128", "batch_size = 129")
    assert parse_problem(changed, "a.py", "a").id != a.id
    assert normalize_source(SOURCE) == normalize_source(reformatted)


def test_overrides_rewrite_constants_and_derived_values_follow(tmp_path):
    path = tmp_path / "p.py"
    path.write_text(SOURCE)
    problem = load_problem(path, size_set="ci", overrides={"dim": 8})
    assert problem.sizes["batch_size"] == 4 and problem.sizes["dim"] == 8
    namespace: dict = {}
    exec(problem.program(), namespace)
    assert namespace["batch_size"] == 4
    assert namespace["hidden"] == 32
    assert list(namespace["get_inputs"]()[0].shape) == [4, 32]
    assert problem.id == load_problem(path).id  # sizes do not change the id


def test_bad_overrides_and_size_sets_say_what_exists(tmp_path):
    path = tmp_path / "p.py"
    path.write_text(SOURCE)
    with pytest.raises(ProblemError, match="Constants you can set: batch_size, dim, hidden"):
        load_problem(path, overrides={"nope": 1})
    with pytest.raises(ProblemError, match=r"no size set 'huge'.*known: default, ci"):
        load_problem(path, size_set="huge")


@pytest.mark.parametrize("missing", ["class Model", "def get_inputs", "def get_init_inputs"])
def test_a_file_without_the_contract_is_refused_with_what_to_do(tmp_path, missing):
    path = tmp_path / "p.py"
    path.write_text(SOURCE.replace(missing, missing.replace(" ", " Not")))
    with pytest.raises(ProblemError, match="not a KernelBench-format problem: it lacks"):
        load_problem(path)


def test_bundled_suite_has_the_promised_breadth():
    problems, skipped = find_problems(PROBLEMS)
    assert not skipped
    groups: dict[str, list[str]] = {}
    for p in problems:
        groups.setdefault(p.name.split("/")[0], []).append(p.name)
        assert {"ci", "unseen"} <= {name for name, _ in p.size_sets}, p.name
    assert len(groups["level1"]) >= 12
    assert len(groups["level2"]) >= 20
    assert len(groups["misc"]) >= 3
    assert len({p.id for p in problems}) == len(problems)


def test_resolve_by_bundled_name_path_and_id():
    by_name = resolve_problem("level2/01_gemm_bias_relu", size_set="ci")
    assert by_name.name == "level2/01_gemm_bias_relu"
    assert resolve_problem(by_name.path).id == by_name.id
    assert resolve_problem(by_name.id[:10]).name == by_name.name
    with pytest.raises(ProblemError, match="no problem 'nope'"):
        resolve_problem("nope")


AS_PUBLISHED = ROOT / "tests" / "fixtures" / "as_published"


def test_published_style_files_load_with_their_constants_and_derived_size_sets():
    problems, skipped = find_problems(AS_PUBLISHED)
    assert not skipped and len(problems) == 3
    by_name = {p.name: p for p in problems}
    conv = dict(by_name["conv_groupnorm_bias"].constants)
    assert conv["height"] == conv["width"] == 256  # height = width = 256
    assert (conv["in_channels"], conv["out_channels"]) == (24, 96)  # a, b = 24, 96
    assert "bias_shape" not in conv  # computed from out_channels: it follows overrides
    assert dict(by_name["scaled_matmul"].constants)["M"] == 2048  # M = 1024 * 2
    for p in problems:
        assert {"ci", "unseen"} <= {name for name, _ in p.size_sets}, p.name


def test_overriding_a_constant_recomputes_the_values_computed_from_it():
    path = AS_PUBLISHED / "conv_groupnorm_bias.py"
    problem = load_problem(path, overrides={"out_channels": 48, "width": 10})
    namespace: dict = {}
    exec(problem.program(), namespace)
    assert namespace["bias_shape"] == (48, 1, 1)
    assert (namespace["height"], namespace["width"], namespace["in_channels"]) == (256, 10, 24)


def test_a_problem_that_imports_a_missing_package_says_what_to_install(tmp_path):
    path = tmp_path / "p.py"
    path.write_text("import kforge_no_such_package\n" + SOURCE)
    with pytest.raises(ProblemError, match=r"imports kforge_no_such_package, not installed.*pip"):
        load_problem(path)


def test_problems_show_takes_a_published_file_at_its_derived_ci_sizes():
    from typer.testing import CliRunner

    from kforge_search.cli.app import app

    path = AS_PUBLISHED / "blocked_attention.py"
    result = CliRunner().invoke(app, ["problems", "show", str(path), "--sizes", "ci"])
    assert result.exit_code == 0, result.output
    ci = dict(dict(load_problem(path).size_sets)["ci"])
    assert f"seq_length={ci['seq_length']}" in result.output and "class Model" in result.output
