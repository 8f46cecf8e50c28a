"""Retrieval for agents: cross-platform references, similar problems, diverse top-k, one-shot."""

from __future__ import annotations

import pytest

from kforge_search.store import retrieval
from kforge_search.store.connection import StoreError
from kforge_search.store.signature import op_signature
from kforge_search.store.writer import Writer
from tests.store.factories import candidate, evaluation, problem_record

RELU = problem_record("gemm_relu", "torch.relu(self.linear(x))")
LEAKY = problem_record("gemm_leaky", "torch.nn.functional.leaky_relu(self.linear(x))")
GELU = problem_record("gemm_gelu_scale", "torch.nn.functional.gelu(self.linear(x)) * 2.0")
SOFTMAX = problem_record("softmax", "torch.softmax(x, dim=1)")


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    records = [RELU, LEAKY, GELU, SOFTMAX]

    def add(c, *evals):
        records.extend([c, *evals])
        return c

    # gemm_relu on cpu-cpp: lineage A (4 kernels, the fastest), lineage B (2), lineage C (1).
    root_a = add(candidate(RELU, "cpu-cpp", "a0"))
    records.append(evaluation(root_a, 3.0))
    parent = root_a
    for i, speedup in enumerate((3.5, 4.0, 4.5), 1):
        parent = add(candidate(RELU, "cpu-cpp", f"a{i}", parent))
        records.append(evaluation(parent, speedup))
    root_b = add(candidate(RELU, "cpu-cpp", "b0"))
    child_b = add(candidate(RELU, "cpu-cpp", "b1", root_b))
    records += [evaluation(root_b, 2.0), evaluation(child_b, 2.5)]
    c0 = add(candidate(RELU, "cpu-cpp", "c0"))
    records.append(evaluation(c0, 1.2))
    # Not verified: fast but fails at unseen sizes; fast but incorrect.
    bad = add(candidate(RELU, "cpu-cpp", "overfit"))
    records += [evaluation(bad, 9.0), evaluation(bad, None, "INCORRECT", size_set="unseen")]
    wrong = add(candidate(RELU, "cpu-cpp", "wrong"))
    records.append(evaluation(wrong, None, "INCORRECT"))
    flag = add(candidate(RELU, "cpu-cpp", "flagged"))
    records.append(evaluation(flag, 8.0, generalizes=False))
    # Other platforms for gemm_relu; similar problems on cpu-cpp; an unrelated one.
    for platform, speedups in (("cuda-triton", (5.0, 6.0)), ("cuda-cpp", (2.0,))):
        for i, s in enumerate(speedups):
            c = add(candidate(RELU, platform, f"{platform}{i}"))
            records.append(evaluation(c, s))
    for problem, s in ((LEAKY, 1.5), (GELU, 1.8), (SOFTMAX, 7.0)):
        c = add(candidate(problem, "cpu-cpp", problem.name))
        records.append(evaluation(c, s))
    triton_gelu = add(candidate(GELU, "cuda-triton", "triton-gelu"))
    records.append(evaluation(triton_gelu, 1.1))
    with Writer(tmp_path_factory.mktemp("r") / "k.duckdb") as writer:
        writer.write(records)
        yield writer.reader()


def test_cross_platform_gives_the_best_of_each_other_platform(reader):
    hits = retrieval.cross_platform(reader, RELU.id, "cpu-cpp")
    assert [(h.platform, h.speedup_eager) for h in hits] == [
        ("cuda-triton", 6.0),
        ("cuda-cpp", 2.0),
    ]
    assert all(h.problem_id == RELU.id and h.source for h in hits)


def test_similar_problems_on_the_same_platform(reader):
    hits = retrieval.similar_problems(reader, RELU.id, "cpu-cpp", min_similarity=0.3)
    names = [h.problem_name for h in hits]
    assert names[0] == "gemm_leaky"  # linear,leaky_relu is closest to linear,relu
    assert "gemm_gelu_scale" in names and "softmax" not in names and "gemm_relu" not in names
    assert all(h.platform == "cpu-cpp" for h in hits)
    assert hits[0].similarity >= hits[-1].similarity


def test_similar_problems_of_a_problem_not_stored(reader):
    with pytest.raises(StoreError, match="not in"):
        retrieval.similar_problems(reader, "0000", "cpu-cpp")
    vector = op_signature(RELU.source).vector()
    hits = retrieval.similar_problems(reader, "0000", "cpu-cpp", vector=vector)
    assert hits[0].problem_name == "gemm_relu" and hits[0].similarity == pytest.approx(1.0)


def test_diverse_top_k_spreads_over_lineages(reader):
    hits = retrieval.diverse_top_k(reader, RELU.id, "cpu-cpp", k=4)
    assert [h.speedup_eager for h in hits] == [4.5, 2.5, 1.2, 4.0]
    assert len({h.lineage_id for h in hits[:3]}) == 3


def test_unverified_kernels_are_never_retrieved(reader):
    hits = retrieval.diverse_top_k(reader, RELU.id, "cpu-cpp", k=20)
    assert len(hits) == 7 and max(h.speedup_eager for h in hits) == 4.5  # not 8.0 or 9.0


def test_one_shot_example_per_platform(reader):
    hits = retrieval.one_shot_examples(reader)
    by_platform = {h.platform: h for h in hits}
    assert sorted(by_platform) == ["cpu-cpp", "cuda-cpp", "cuda-triton"]
    assert by_platform["cpu-cpp"].problem_name == "softmax"  # one op, faster than eager
    assert by_platform["cuda-triton"].speedup_eager == 6.0
    only = retrieval.one_shot_examples(reader, ["cuda-cpp"])
    assert [h.platform for h in only] == ["cuda-cpp"]
