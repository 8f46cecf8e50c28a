"""EvalResults back from stored evaluations: what `kforge search --resume` replays.

The inverse of from_eval.py for what a search needs: status, message, artifacts (the agent's
feedback), correctness, timing, and the baselines' p50 (rebuilt from the stored speedups:
speedup = baseline p50 / candidate p50; the peer of record's too, marked as passing the
evaluation's policy). Baselines rebuilt so are marked `cached`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kforge_search.evaluator.result import (
    Artifacts,
    Baseline,
    Correctness,
    EvalResult,
    Mismatch,
    PeerCheck,
    Status,
    TimingStats,
)

from .reader import Reader

_COLUMNS = (
    "e.candidate_id, e.status, e.message, e.stage, e.problem_id, p.name AS problem_name, "
    "e.platform, e.policy, e.size_set, e.sizes, h.device_name, h.torch_version, e.artifacts, "
    "e.trials_run, e.trials_passed, e.max_abs_err, e.max_rel_err, e.atol, e.rtol, "
    "e.timing_method, e.runs, e.p20_ms, e.p50_ms, e.p80_ms, e.timing_meaningful, "
    "e.speedup_eager, e.speedup_compile, e.generalizes, e.warnings, e.duration_s, e.created_at, "
    "e.phases, e.peer, e.speedup"
)


def _artifacts(text: str | None) -> Artifacts:
    data = json.loads(text or "{}")
    mismatch = data.get("mismatch")
    return Artifacts(
        compile_log=data.get("compile_log", ""),
        output_tail=data.get("output_tail", ""),
        traceback=data.get("traceback", ""),
        mismatch=Mismatch(
            **{
                **mismatch,
                "indices": tuple(tuple(i) for i in mismatch.get("indices", ())),
            }
        )
        if mismatch
        else None,
        reasons=tuple(data.get("reasons", ())),
    )


def result_from_row(row: dict[str, Any]) -> EvalResult:
    timing = None
    if row["p50_ms"] is not None:
        timing = TimingStats(
            method=row["timing_method"] or "",
            runs=row["runs"] or 0,
            p20_ms=row["p20_ms"],
            p50_ms=row["p50_ms"],
            p80_ms=row["p80_ms"],
            meaningful=bool(row["timing_meaningful"]),
        )
    baselines = []
    for kind in ("eager", "compile"):
        speedup = row[f"speedup_{kind}"]
        if speedup and timing is not None:
            p50 = speedup * timing.p50_ms
            base = TimingStats(timing.method, timing.runs, p50, p50, p50)
            baselines.append(Baseline(kind, True, base, cached=True))
    peer, speedup = row.get("peer"), row.get("speedup")
    if peer and peer not in ("eager", "compile") and speedup and timing is not None:
        p50 = speedup * timing.p50_ms
        base = TimingStats(timing.method, timing.runs, p50, p50, p50)
        passed = (PeerCheck(row["policy"], True),)
        baselines.append(Baseline(peer, True, base, cached=True, checks=passed))
    sizes = json.loads(row["sizes"]) if isinstance(row["sizes"], str) else row["sizes"] or {}
    generalizes = {True: "yes", False: "no"}.get(row["generalizes"], "unchecked")
    return EvalResult(
        status=Status(row["status"]),
        message=row["message"] or "",
        stage=row["stage"],
        problem_id=row["problem_id"],
        problem_name=row["problem_name"] or "",
        platform=row["platform"],
        policy=row["policy"],
        candidate_hash=row["candidate_id"],
        sizes=tuple(sorted(sizes.items())),
        device_name=row["device_name"] or "",
        torch_version=row["torch_version"] or "",
        artifacts=_artifacts(row["artifacts"]),
        correctness=Correctness(
            row["trials_run"] or 0,
            row["trials_passed"] or 0,
            row["max_abs_err"] or 0.0,
            row["max_rel_err"] or 0.0,
            row["atol"] or 0.0,
            row["rtol"] or 0.0,
        ),
        timing=timing,
        baselines=tuple(baselines),
        warnings=tuple(row["warnings"] or ()),
        generalizes=generalizes,
        duration_s=row["duration_s"] or 0.0,
        phases=tuple(json.loads(row["phases"] or "{}").items()),
    )


def run_results(reader: Reader, run_ids: Sequence[str]) -> dict[str, EvalResult]:
    """The latest stored evaluation of each candidate in these runs, by candidate id."""
    if not run_ids:
        return {}
    marks = ", ".join("?" for _ in run_ids)
    rows = reader.query(
        f"SELECT {_COLUMNS} FROM evaluations e "
        "LEFT JOIN problems p ON p.id = e.problem_id "
        "LEFT JOIN hardware h ON h.id = e.hardware_id "
        f"WHERE e.run_id IN ({marks}) ORDER BY e.created_at",
        list(run_ids),
    ).dicts()
    return {row["candidate_id"]: result_from_row(row) for row in rows}
