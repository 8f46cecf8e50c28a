"""A candidate's child, driven from the evaluator's side (pipeline.Evaluator), event by
event, to its result: verify (trial by trial: trial_check.py) -> time (-> burst, the timed
runs checked: timed_check.py) (-> profile) (-> the unseen sizes' verification).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kforge_search.evaluator import timed_check
from kforge_search.evaluator.config import EvalConfig
from kforge_search.evaluator.devicelock import DeviceLock
from kforge_search.evaluator.host_load import LoadProbe, host_timed
from kforge_search.evaluator.job import Job, trial_path
from kforge_search.evaluator.oracle import Oracle, OracleError
from kforge_search.evaluator.oracle_compare import RunSpec, labels, load
from kforge_search.evaluator.outcome import (
    describe_exit,
    exit_result,
    failure_result,
    mismatch_message,
    not_general,
    output_tail,
    timing_problem,
    with_child_warning,
)
from kforge_search.evaluator.policy import get_policy
from kforge_search.evaluator.profile import Profile
from kforge_search.evaluator.reference import Reference
from kforge_search.evaluator.resident import Resident
from kforge_search.evaluator.result import (
    DEVICE_BUSY_REASON,
    Artifacts,
    EvalResult,
    Status,
    TimingStats,
)
from kforge_search.evaluator.sandbox import Child
from kforge_search.evaluator.timed_runs import timed_path
from kforge_search.evaluator.trial_check import TrialCheck
from kforge_search.evaluator.verify import compare_timed, placed
from kforge_search.problem import Problem

UNSEEN_SKIPPED = "the unseen sizes were not checked"


def reveal(runs: list[int], calls: list[int]) -> str:
    """The command that asks a candidate's child for the chosen runs' and calls' outputs."""
    return " ".join(["reveal", *map(str, runs), "|", *map(str, calls)])


def rejected(
    base: EvalResult, child: Child, problem: tuple[str, str], correctness: Any, timing: Any
) -> EvalResult:
    """REJECTED in the time stage, for cheating seen in or after the timed runs."""
    child.kill("")
    reason, message = problem
    return replace(
        base,
        status=Status.REJECTED,
        stage="time",
        message=f"{message} [{reason}]",
        correctness=correctness,
        timing=timing,
        artifacts=Artifacts(output_tail=output_tail(child), reasons=(reason,)),
    )


@dataclass
class CandidateDrive:
    """One candidate's child, from the parent's side: `oracle` (and `unseen_oracle`) answer
    for the reference where the parent does not hold it; `lock` is the device's, held shared
    by the child's start; `device` is where the comparisons run (None: the CPU).
    `unseen_below_ms`: the unseen sizes are checked only for a candidate timed faster than
    this (the caller's best kept draft: a slower one cannot be kept, so its check would be
    spent for nothing; its result says `generalizes` "unchecked" and why). None: always.
    `lane_wait`: how long the candidate waited for the timing lane (its own phase).
    `resident`: where a held reference's trials stay on `device` between candidates, where
    the parent compares them (not `in_oracle`)."""

    child: Child
    job: Job
    ref: Reference
    unseen: tuple[Problem, Reference] | None
    oracle: Callable[[], Oracle]
    unseen_oracle: Callable[[], Oracle] | None
    lock: DeviceLock
    config: EvalConfig
    device: str | None
    unseen_below_ms: float | None = None
    lane_wait: float = 0.0
    resident: Resident | None = None  # held references' trials kept on `device` (resident.py)
    # the problem's and the unseen sizes' held trials compared in their oracles (Job.
    # share_outputs and share_unseen say so to the child: oracle_held.py)
    in_oracle: tuple[bool, bool] = (False, False)

    def result(self, base: EvalResult) -> EvalResult:
        """The candidate's result, from `base` (what the evaluation knew before its child)."""
        child, ref, unseen = self.child, self.ref, self.unseen
        policy = get_policy(self.config.policy)
        check = ref.check(policy, self.oracle, self.device, self.resident, self.in_oracle[0])
        unseen_check = (
            unseen[1].check(
                policy, self.unseen_oracle, self.device, self.resident, self.in_oracle[1]
            )
            if unseen and self.unseen_oracle
            else None
        )
        try:
            return self._events(base, check, unseen_check)
        except OracleError as exc:  # a streamed reference's oracle could not answer
            child.kill("")
            return replace(base, status=Status.INFRA_ERROR, stage=child.stage or "verify",
                           message=str(exc), artifacts=oracle_artifacts(exc))  # fmt: skip
        finally:
            check.close()
            if unseen_check is not None:
                unseen_check.close()

    def _events(
        self, base: EvalResult, check: TrialCheck, unseen_check: TrialCheck | None
    ) -> EvalResult:
        child, job, ref, unseen, lock = self.child, self.job, self.ref, self.unseen, self.lock
        correctness = base.correctness
        timed_ok: EvalResult | None = None  # verified and timed (and profiled): it stands
        unseen_sizes = unseen[0].sizes if unseen else {}
        timing, runs, went, draw = TimingStats("", 0, 0.0, 0.0, 0.0), 0, 0.0, 0
        probe: LoadProbe | None = None  # the host's other load over the timed runs
        burst_draw, bursts = 0, 0  # the last burst's inputs' draw; bursts asked
        tries = 1  # timings asked: one whose host clock shows hidden work is asked again
        chosen: tuple[list[int], list[int]] = ([], [])  # timed runs, burst calls checked

        def after_timing(result: EvalResult) -> EvalResult | None:
            skipped = self._unseen_skipped(result)
            if unseen is None or skipped:
                child.kill("")
                return replace(
                    result,
                    warnings=(*result.warnings, *filter(None, [skipped])),
                    artifacts=Artifacts(output_tail=output_tail(child)),
                )
            lock.resume_work()  # the unseen sizes' model and trials run on the device
            child.send("unseen")
            return None

        while (event := child.next_event()) is not None:
            kind = event["type"]
            if kind == "warning":  # the child runs without its file-system sandbox (landlock.py)
                base = with_child_warning(base, event)
                continue
            if kind == "aside":  # a compile, a file written: host work, off the lock
                lock.step_aside()  # (compiling.OffLane, Channel.host_work)
                continue
            if kind == "pause":  # the compile is done: the hold back before its next kernel
                child.resume_after(lock.resume_work)
                continue
            if kind == "fail":
                child.kill("")
                if timed_ok is not None and child.stage == "unseen":
                    return not_general(timed_ok, unseen_sizes, event["message"], child)
                return failure_result(base, event, child.stage, child.exit)
            if kind == "trial":  # one verification trial's outputs: compared, then the next
                later = timed_ok is not None and unseen_check is not None
                path = job.unseen_outputs_path if later else job.outputs_path
                # the hold back (the child wrote its file aside), behind a timing that waits:
                # the comparison runs on the device, and so does the next trial
                began = time.monotonic()
                lock.resume_work()
                held = time.monotonic()
                trials = unseen_check if later else check
                assert trials is not None
                # a held reference's trials exist already: the child's next trial runs while
                # this one is compared, under this hold (its "aside" lets it go afterwards);
                # where the oracle compares its shared outputs, the child keeps them till the
                # next trial's command (`ahead`), and its last trial is compared first
                shared = job.share_unseen if later else job.share_outputs  # this stage's
                pos = int(event["pos"])
                if trials.oracle is None:
                    ahead = not shared
                else:  # a held reference's, in the oracle (oracle_held.py)
                    ahead = trials.held is not None and shared and pos + 1 < len(trials.ids)
                if ahead:
                    child.ask("ahead" if shared else "next")  # its stage's clock starts again
                trials.add(pos, Path(trial_path(path, pos)))
                added = time.monotonic()
                child.note(compared_line(event["pos"], held - began, added - held, trials.spent))
                if not ahead:  # the oracle's trial was made now: the child waited for it
                    lock.yield_to_timing()  # between trials: a timing that waits goes first
                    child.ask("next")  # its stage's clock starts again: the comparison is ours
            elif kind == "verified":
                comparison = check.result()
                correctness = comparison.correctness
                if not comparison.ok:
                    child.send("stop")
                    child.kill("")
                    assert comparison.mismatch is not None
                    return replace(
                        base,
                        status=Status.INCORRECT,
                        stage="verify",
                        message=mismatch_message(comparison.mismatch, correctness),
                        correctness=correctness,
                        artifacts=Artifacts(
                            mismatch=comparison.mismatch, output_tail=output_tail(child)
                        ),
                    )
                # no other evaluator's work on the device, nor a spare's warm-up (standby.py);
                # the shared hold is let go while waiting: the child is idle until "time"
                waited = time.monotonic()
                lock.hold(exclusive=True)
                self.lane_wait = time.monotonic() - waited  # in the child's verify stage
                draw = timed_check.draw()  # only now: after the candidate is loaded
                if host_timed(job.timing_method):  # what else the host ran meanwhile
                    probe = LoadProbe.start(child.pid)
                child.send(f"time {draw}")
            elif kind == "timing":
                timing, runs = TimingStats(**event["timing"]), int(event.get("runs", 0))
                others = probe.others(extend=True) if probe is not None else 0.0
                timing = replace(timing, host_others=round(others, 2))
                if problem := timing_problem(timing, ""):
                    if tries < timed_check.WALL_ATTEMPTS:  # the host's hiccup, maybe
                        draw, tries = timed_check.draw(), tries + 1
                        if host_timed(job.timing_method):
                            probe = LoadProbe.start(child.pid)
                        child.send(f"time {draw}")
                        continue
                    return rejected(base, child, problem, correctness, timing)
                burst_draw, bursts = timed_check.draw(), 1
                child.send(f"burst {timed_check.burst_calls(timing)} {burst_draw}")
            elif kind == "burst-ready":
                went = time.perf_counter()  # the parent's own clock
                child.send("go")
            elif kind == "burst":
                wall_ms = (time.perf_counter() - went) * 1e3
                calls = int(event["calls"])
                problem = timed_check.wall_problem(timing, wall_ms, calls)
                if problem and bursts < timed_check.WALL_ATTEMPTS:  # the host's hiccup, maybe
                    burst_draw, bursts = timed_check.draw(), bursts + 1
                    child.send(f"burst {timed_check.burst_calls(timing)} {burst_draw}")
                    continue
                lock.hold(exclusive=False)
                if problem:
                    return rejected(base, child, problem, correctness, timing)
                k_runs, k_calls = timed_check.reveal_counts(ref.output_bytes)
                chosen = (timed_check.choose(runs, k_runs), timed_check.choose(calls, k_calls))
                child.send(reveal(*chosen))
            elif kind == "revealed":
                try:
                    stale = self._check_timed(draw, burst_draw, chosen)
                except OracleError as exc:
                    child.kill("")
                    return replace(base, status=Status.INFRA_ERROR, stage="time",
                                   message=str(exc), correctness=correctness,
                                   artifacts=oracle_artifacts(exc))  # fmt: skip
                if stale:
                    problem = timing_problem(timing, stale)
                    assert problem is not None
                    return rejected(base, child, problem, correctness, timing)
                timed_ok = replace(
                    base,
                    status=Status.OK,
                    stage="done",
                    message="verified and timed",
                    correctness=correctness,
                    timing=timing,
                )
                if self.config.profile:
                    lock.hold(exclusive=True)  # the profile is measured too
                    child.send("profile")
                    continue
                if (done := after_timing(timed_ok)) is not None:
                    return done
            elif kind == "profile":
                assert timed_ok is not None
                lock.hold(exclusive=False)
                timed_ok = replace(timed_ok, profile=Profile.from_dict(event["profile"]))
                if (done := after_timing(timed_ok)) is not None:
                    return done
            elif kind == "unseen":
                assert timed_ok is not None and unseen is not None and unseen_check is not None
                comparison = unseen_check.result()
                child.kill("")
                if not comparison.ok:
                    assert comparison.mismatch is not None
                    why = mismatch_message(comparison.mismatch, comparison.correctness)
                    return not_general(timed_ok, unseen_sizes, why, child)
                return replace(
                    timed_ok, generalizes="yes", artifacts=Artifacts(output_tail=output_tail(child))
                )
        assert child.exit is not None
        if timed_ok is not None:  # a later stage failed: the verified, timed result stands
            why = describe_exit(child.exit)
            if child.exit.stage == "unseen":
                return not_general(timed_ok, unseen_sizes, f"the candidate's process: {why}", child)
            return replace(
                timed_ok,
                warnings=(*timed_ok.warnings, f"profile failed: {why}"),
                artifacts=Artifacts(output_tail=output_tail(child)),
            )
        return exit_result(base, child.exit, correctness)

    def _unseen_skipped(self, result: EvalResult) -> str:
        """Why the unseen sizes are not checked for this timed `result`, or ""."""
        below, timing = self.unseen_below_ms, result.timing
        if below is None or self.unseen is None or timing is None or not timing.meaningful:
            return ""  # (an interpreter's time says nothing of the kernel's speed)
        if timing.p50_ms < below:
            return ""
        return (
            f"{UNSEEN_SKIPPED}: {timing.p50_ms:.4f} ms is not faster than the best kept draft's "
            f"{below:.4f} ms, so it could not be kept"
        )

    def _check_timed(self, draw: int, burst_draw: int, chosen: tuple[list[int], list[int]]) -> str:
        """The chosen timed runs' and burst calls' whole outputs (the child saved them)
        against the oracle's for the same inputs: "" when they match, else what differs.
        Timed run r ran on inputs r of `draw`, burst call c on inputs c of `burst_draw`. An
        oracle that died meanwhile is started again, once."""
        oracle, job, ref, lock = self.oracle, self.job, self.ref, self.lock
        runs, calls = chosen
        if not runs and not calls:
            Path(timed_path(job.outputs_path)).unlink(missing_ok=True)
            return ""
        # beside atol, twice the float32 reference's own error (the float64 rule's bound for
        # an output as exact as the reference: verify.py), which the oracle shares
        slack = [2 * e for e in ref.numerics.float32_error]
        if ref.streamed is not None or job.share_timed:  # compared in the oracle
            # (oracle_compare.py; the outputs came as CUDA IPC handles where it shares them)
            lock.resume_work()
            spec = RunSpec(self.config.policy, draw, runs, calls, timed_path(job.outputs_path),
                           slack, burst_draw)  # fmt: skip
            return oracle().compare_runs(spec)
        # files are read off the device lock (the child wrote its file aside, the oracle
        # writes its own aside); the oracle's runs and the comparison hold it shared
        actual = load(Path(timed_path(job.outputs_path)))

        def ask(on: int, which: list[int]) -> list[list[Any]]:
            lock.resume_work()  # the oracle's forward runs on the device, its file aside
            return oracle().outputs(on, which, lock.step_aside)

        def asked(on: int, which: list[int]) -> list[list[Any]]:
            if not which:
                return []
            try:
                return ask(on, which)
            except OracleError:
                return ask(on, which)

        expected = asked(draw, runs) + asked(burst_draw, calls)
        lock.resume_work()
        policy = get_policy(self.config.policy)
        expected, actual = placed((expected, actual), self.device)
        return compare_timed(expected, actual, labels(runs, calls), policy, slack)


def compared_line(pos: object, waited: float, added: float, spent: dict[str, float]) -> str:
    """The event journal's line for one trial compared by the parent: its wait for the
    device's hold, the whole comparison and its parts (TrialCheck.spent: a held reference's)."""
    parts = " ".join(f"{k}={v:.4f}" for k, v in spent.items())
    return f"compared {pos} wait={waited:.4f} add={added:.4f} {parts}".rstrip()


def oracle_artifacts(exc: OracleError) -> Artifacts:
    """An oracle's failure's artifacts: DEVICE_BUSY_REASON where it ran out of device memory
    others held (a bench evaluates the problem again alone)."""
    return Artifacts(reasons=(DEVICE_BUSY_REASON,) if exc.busy else ())
