"""Search efficiency (evolutionary vs random at the same budget) on a synthetic oracle: a
known landscape over the genome, so what each strategy found can be checked exactly."""

from __future__ import annotations

from typer.testing import CliRunner

from kforge_search.agents.builtin import BuiltinAgent
from kforge_search.agents.builtin.agent import genome_in_source, relevant_genes, seed_genome
from kforge_search.cli.app import app
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from kforge_search.search.efficiency import Trace, compare, evolutionary_trace

TRITON = get_platform("cuda-triton")  # sources only: nothing here runs a kernel
PROBLEM = resolve_problem("level2/01_gemm_bias_relu")
BEST = {"block_m": 64, "block_n": 128, "num_stages": 4, "group_m": 4}


def landscape(genome):
    """1 ms at BEST, 0.25 ms more per gene away from it; block_k 128 fails."""
    if genome.block_k == 128:
        return None
    return 1.0 + 0.25 * sum(getattr(genome, k) != v for k, v in BEST.items())


def test_both_strategies_spend_the_same_budget_and_are_scored_against_the_best_known():
    agent = BuiltinAgent()
    plan = agent.plan(PROBLEM)
    start = seed_genome(plan, TRITON, "loose")
    timed = []

    def oracle(genome):
        timed.append(genome)
        return landscape(genome)

    result = compare(
        agent, PROBLEM, TRITON, "loose", start, relevant_genes(plan, start),
        lambda source: genome_in_source(source, TRITON), oracle, 2.0, budget=6, trials=2,
    )  # fmt: skip
    assert [t.strategy for t in result.traces] == ["evolutionary", "random"] * 2
    assert all(len(t.best) == 6 for t in result.traces)
    assert all(list(t.best) == sorted(t.best) for t in result.traces)  # best so far
    seed_speedup = 2.0 / landscape(start)
    assert all(t.best[0] == seed_speedup for t in result.traces if t.strategy == "evolutionary")
    assert result.best_known == max(t.best[-1] for t in result.traces) <= 2.0
    for strategy in ("evolutionary", "random"):
        counts = result.reached(strategy)
        assert len(counts) == 2 and all(c is None or 1 <= c <= 6 for c in counts)
        assert result.median_evaluations(strategy) is not None
    # the strategy that found the best known reached 95% of it within the budget
    assert any(c is not None for s in ("evolutionary", "random") for c in result.reached(s))
    assert len(timed) >= 6


def test_evaluations_to_is_the_first_count_at_the_target():
    trace = Trace("random", 0, (0.0, 1.0, 1.0, 1.9, 2.0))
    assert trace.evaluations_to(1.9) == 4
    assert trace.evaluations_to(0.5) == 2
    assert trace.evaluations_to(2.5) is None


def test_search_efficiency_needs_a_timed_platform():
    args = ["bench", "level2/01_gemm_bias_relu", "--platform", "cpu-triton", "--sizes", "ci"]
    out = CliRunner().invoke(app, [*args, "--search-efficiency"])
    assert out.exit_code == 2 and "not meaningful" in out.output


def test_evolutionary_trials_explore_differently():
    """Each trial's search has its own seed: trials are samples, not one path thrice."""

    def path(trial: int) -> list:
        timed: list = []

        def oracle(genome):
            timed.append(genome)
            return landscape(genome)

        evolutionary_trace(
            BuiltinAgent(), PROBLEM, TRITON, "loose",
            lambda source: genome_in_source(source, TRITON), oracle, 2.0, 8, trial,
        )  # fmt: skip
        return timed

    first = path(0)
    assert path(0) == first  # a rerun repeats
    assert path(1) != first and path(2) != first


def test_the_efficiency_table_pipes_as_json(tmp_path, monkeypatch, capsys):
    """run_efficiency's listing through cli/output.py, the searches replaced by a known result."""
    import json

    from kforge_search.agents.builtin import screen
    from kforge_search.cli.efficiency import run_efficiency
    from kforge_search.search import efficiency

    traces = (Trace("evolutionary", 0, (1.0, 2.0)), Trace("random", 0, (1.0, 1.0)))
    known = efficiency.Efficiency(PROBLEM.name, 2, 2.0, traces)
    monkeypatch.setattr(efficiency, "compare", lambda *args: known)
    monkeypatch.setattr(screen, "time_reference", lambda problem, platform: 1.0)
    cpp = get_platform("cpu-cpp")  # timed; nothing runs: the oracle is never asked
    run_efficiency([PROBLEM], cpp, "strict", 2, 1, str(tmp_path), "json")
    (row,) = json.loads(capsys.readouterr().out)
    assert row == {"problem": PROBLEM.name, "best_known_speedup": 2.0, "evolutionary": [2],
                   "random": [None], "genomes_timed": 0}  # fmt: skip
    assert json.loads((tmp_path / "efficiency.json").read_text())["problems"][0]["random"] == [None]
