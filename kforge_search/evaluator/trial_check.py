"""A candidate's verification, one trial at a time (parent side).

The candidate's child saves each trial's outputs (and the buffers the reference's forward
changes) in a file of its own and waits; the parent reads it, takes the reference's outputs
for that trial and compares (worker.verify_trials). The reference's trial comes from the
parent's memory: the parent lets the child run its next trial as it starts comparing this
one, under the same hold of the device (candidate_drive.py; one at a time, each trial cost
the H200 a wait for the hold, a file read and a comparison, 0.37 s, while the child idled).
Or, for a streamed reference (footprint.streamed: every trial's outputs and float64 copies
would not fit), the parent hands the candidate's file to the reference's oracle, which
recomputes its trial only then, compares there and answers with the verdict
(oracle_compare.py), and only then does the child run its next trial: the reference's
outputs for a trial never exist before the candidate's are fixed, and never leave the
oracle. The parent holds one trial's outputs, of each side, at a time. On a CUDA device a
held reference's trials go the same way (EvalConfig.trials_in_oracle): the oracle keeps
them there, and compares without recomputing (oracle_held.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kforge_search.evaluator.oracle import Oracle, OracleError
from kforge_search.evaluator.oracle_compare import TrialSpec, one_trial
from kforge_search.evaluator.policy import NumericPolicy
from kforge_search.evaluator.resident import Trials
from kforge_search.evaluator.result import Mismatch
from kforge_search.evaluator.verify import Comparison, merge


@dataclass
class TrialCheck:
    """One verification's comparisons, trial by trial, against one reference: `outputs` and
    `exact` per compared trial where the parent holds them (empty: a streamed reference,
    whose trials `oracle` recomputes and compares), `buffers`, `ids`, `wide`, `plain` and
    `scales` (atol's factors per trial and output: verify.atol_scales)."""

    outputs: Sequence[Sequence[Any]]
    exact: Sequence[Sequence[Any]] | None
    buffers: Sequence[dict[str, Any]]
    ids: Sequence[int]
    wide: Sequence[int]
    plain: Sequence[int] | None
    scales: Sequence[Sequence[float]]
    policy: NumericPolicy
    oracle: Callable[[], Oracle] | None = None  # a streamed reference's
    float64: bool = False  # a streamed reference's trials have float64 outputs
    device: str | None = None  # where the comparisons run (verify.placed; None: the CPU)
    output_bytes: int = 0  # one trial's outputs (a streamed reference's oracle places them)
    # a held reference's trials and their bytes, which `oracle` keeps and compares against
    # (oracle_held.py); None: streamed, or compared here
    held: Trials | None = None
    held_bytes: int = 0
    parts: list[Comparison] = field(default_factory=list)
    spent: dict[str, float] = field(default_factory=dict)  # the last held trial's parts' seconds
    _streaming: Oracle | None = None

    def add(self, pos: int, path: Path) -> Comparison:
        """Compares the candidate's trial `pos` (its file at `path`, read and removed)."""
        if pos != len(self.parts) or pos >= len(self.ids):
            path.unlink(missing_ok=True)
            raise OracleError(f"trial {pos} came out of turn ({len(self.parts)} compared)")
        found = self._streamed(path) if self.oracle is not None else self._held(pos, path)
        self.parts.append(found)
        return found

    def _held(self, pos: int, path: Path) -> Comparison:
        row = self.exact[pos] if self.exact is not None else None
        buffers = [self.buffers[pos]] if pos < len(self.buffers) else None
        return one_trial(self.outputs[pos], row, buffers, path, self.policy, self.ids[pos],
                         self.wide, self.plain, self.scales[pos], self.device,
                         spent=self.spent)  # fmt: skip

    def _streamed(self, path: Path) -> Comparison:
        """A streamed reference's trial, or a held one's the oracle keeps, compared by its
        oracle."""
        assert self.oracle is not None
        if self._streaming is None:
            self._streaming = self.oracle()
            spec = TrialSpec(
                self.policy.name,
                self.float64,
                list(self.ids),
                list(self.wide),
                list(self.plain) if self.plain is not None else None,
                [list(s) for s in self.scales],
                self.output_bytes,
                (
                    self._streaming.hold_trials(self.held, self.held_bytes)
                    if self.held is not None
                    else ""
                ),
            )
            self._streaming.compare_trials(spec)
        return self._streaming.compare_trial(path)

    def result(self) -> Comparison:
        """Every trial's comparison as one (verify.merge); a candidate that sent fewer
        trials than the reference kept fails on the count."""
        self.close()
        found = merge(self.parts)
        if len(self.parts) != len(self.ids) and found.mismatch is None:
            count = Mismatch(0, 0, "count", f"{len(self.ids)} trials", f"{len(self.parts)} trials")
            return Comparison(found.correctness, count)
        return found

    def close(self) -> None:
        """Ends the oracle's stream, where one is open (the oracle stays for later asks)."""
        if self._streaming is not None:
            oracle, self._streaming = self._streaming, None
            oracle.end_trials()
