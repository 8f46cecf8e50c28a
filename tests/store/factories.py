"""Small builders of records and EvalResults for the store tests."""

from __future__ import annotations

from kforge_search.evaluator.result import Baseline, EvalResult, Status, TimingStats
from kforge_search.problem import Problem
from kforge_search.store.ids import candidate_id, content_id
from kforge_search.store.records import CandidateRecord, EvaluationRecord, ProblemRecord
from kforge_search.store.signature import op_signature

MODEL = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)

    def forward(self, x):
        return {body}
"""


def problem_record(name: str, body: str) -> ProblemRecord:
    """A problem whose forward returns `body`, e.g. "torch.relu(self.linear(x))"."""
    source = MODEL.format(body=body)
    sig = op_signature(source)
    return ProblemRecord(content_id(name), name, "", source, sig.text, sig.vector())


def candidate(
    problem: ProblemRecord, platform: str, tag: str, parent: CandidateRecord | None = None
) -> CandidateRecord:
    source = f"TAG = {tag!r}\n\n\nclass ModelNew:\n    pass\n"
    return CandidateRecord.create(
        source,
        problem.id,
        platform,
        parent_ids=(parent.id,) if parent else (),
        lineage_id=parent.lineage_id if parent else "",
        generation=parent.generation + 1 if parent else 0,
    )


def evaluation(
    cand: CandidateRecord,
    speedup: float | None,
    status: str = "OK",
    generalizes: bool | None = None,
    hardware_id: str = "hw",
    size_set: str = "default",
) -> EvaluationRecord:
    ok = status == "OK"
    return EvaluationRecord(
        id=content_id(cand.id, hardware_id, size_set),
        candidate_id=cand.id,
        problem_id=cand.problem_id,
        platform=cand.platform,
        hardware_id=hardware_id,
        status=status,
        stage="done" if ok else "verify",
        policy="strict",
        size_set=size_set,
        p50_ms=1.0 / speedup if ok and speedup else None,
        speedup_eager=speedup if ok else None,
        timing_meaningful=ok and speedup is not None,
        generalizes=generalizes,
    )


def eval_result(
    problem: Problem, source: str, platform: str = "cpu-cpp", status: Status = Status.OK
) -> EvalResult:
    """An EvalResult as the evaluator would return it, without running anything."""
    ok = status is Status.OK
    timing = TimingStats("perf_counter", 50, 0.9, 1.0, 1.1) if ok else None
    return EvalResult(
        status=status,
        message="ok" if ok else "values differ",
        stage="done" if ok else "verify",
        problem_id=problem.id,
        problem_name=problem.name,
        platform=platform,
        policy="strict",
        candidate_hash=candidate_id(source, platform),
        sizes=tuple(sorted(problem.sizes.items())),
        device_name="cpu",
        torch_version="2.13.0",
        timing=timing,
        baselines=(
            Baseline("eager", True, TimingStats("perf_counter", 50, 1.9, 2.0, 2.1)),
            Baseline("compile", True, TimingStats("perf_counter", 50, 1.4, 1.5, 1.6)),
        )
        if ok
        else (),
    )


def cli_app():
    """The main app's shape: `kforge db ...` (the real app registers db_app the same way)."""
    import typer

    from kforge_search.cli.db import db_app

    app = typer.Typer()
    app.add_typer(db_app, name="db")

    @app.callback()
    def main() -> None:
        """kforge (test shell)."""

    return app
