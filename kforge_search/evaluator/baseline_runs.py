"""The evaluator's baselines (evaluator/pipeline.py's Evaluator has them from here): cached
on disk per node (baselines.py), measured in a child of their own, and, where a problem has
none yet, measured by a thread beside its first candidate's build, verification and timing.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from kforge_search.evaluator import baselines as noise
from kforge_search.evaluator import peers
from kforge_search.evaluator.baselines import cache_key
from kforge_search.evaluator.footprint import Footprint
from kforge_search.evaluator.outcome import describe_exit
from kforge_search.evaluator.reference import Reference
from kforge_search.evaluator.result import Baseline
from kforge_search.platforms import Platform
from kforge_search.problem import Problem

if TYPE_CHECKING:
    from kforge_search.evaluator.baselines import BaselineCache
    from kforge_search.evaluator.config import EvalConfig
    from kforge_search.evaluator.reference_store import ReferenceStore


class BaselineRuns:
    """The Evaluator's baselines; it provides the attributes and children named here."""

    config: EvalConfig
    _baselines: BaselineCache
    _stored: ReferenceStore  # its `computing` lock: once per node
    _ahead: dict[str, threading.Thread]  # baselines measured ahead, by key

    def baselines(
        self, problem: Problem, platform: Platform, ref: Reference
    ) -> tuple[Baseline, ...]:
        """Cached, else measured: checked at the problem's sizes and its unseen ones alike
        (or being measured ahead, by another thread or evaluator of the node: waited for)."""
        if not self.config.baselines or not platform.timing_meaningful:
            return ()
        kinds, key = self._baseline_kinds(problem, platform, ref)
        found = {k: b for k in kinds if (b := self._baselines.get(key, k))}
        missing = tuple(k for k in kinds if k not in found)
        if missing:  # measured once per node: another evaluator needing them waits, then reads
            with self._stored.computing(f"baselines|{key}"):
                found.update({k: b for k in missing if (b := self._baselines.get(key, k))})
                missing = tuple(k for k in kinds if k not in found)
                unseen = self._unseen(problem, platform)[0] if missing else None
                for baseline in self._measured(problem, platform, missing, ref, unseen):
                    # a noisy one: in memory; a busy one: nowhere (baselines.py)
                    self._baselines.put(key, baseline)
                    found[baseline.kind] = baseline
        return tuple(found[k] for k in kinds if k in found)

    def _baseline_kinds(
        self, problem: Problem, platform: Platform, ref: Reference
    ) -> tuple[tuple[str, ...], str]:
        """The baselines' kinds for this device and their cache key."""
        kinds = peers.kinds_for(
            self.config.baselines, platform.device_kind, self.config.reduced_precision
        )
        key = cache_key(problem, platform.name, ref.device_name, ref.torch_version, self.config)
        return kinds, key

    def _baselines_ahead(self, problem: Problem, platform: Platform, ref: Reference) -> None:
        """Where the problem's baselines are not cached, a thread measures them beside its
        candidate's build, verification and timing (its own children, its own holds of the
        device lock); `baselines()` after the candidate then finds them, or waits for the
        rest. Measured after the candidate, a problem's first evaluation took their time on
        top of its own (H200, level 1 at published sizes: 15-30 s of a 35-50 s seed)."""
        if not (self.config.baselines_ahead and self.config.baselines):
            return
        if not platform.timing_meaningful:
            return
        kinds, key = self._baseline_kinds(problem, platform, ref)
        if (running := self._ahead.get(key)) is not None and running.is_alive():
            return
        if all(self._baselines.get(key, k) for k in kinds):
            return

        def measure() -> None:
            try:
                self.baselines(problem, platform, ref)
            except Exception:  # `baselines()` after the candidate measures them again
                pass
            finally:
                self._drop_thread_locks()

        thread = threading.Thread(target=measure, name=f"baselines-{problem.name}", daemon=True)
        self._ahead[key] = thread
        for done in [k for k, t in self._ahead.items() if not t.is_alive() and k != key]:
            del self._ahead[done]
        thread.start()

    def _measured(
        self,
        problem: Problem,
        platform: Platform,
        kinds: tuple[str, ...],
        ref: Reference,
        unseen: tuple[Problem, Reference] | None = None,
    ) -> list[Baseline]:
        """The kinds measured; those that ran out of device memory beside other processes
        (a bench's other jobs: H200, level 1, 4 jobs a GPU) once more, with the device lock
        exclusive for the whole child. Busy again: returned so, cached nowhere."""
        if not kinds:
            return []
        first = self._run_baselines(problem, platform, kinds, ref, unseen=unseen)
        if not (busy := noise.busy_kinds(first)):
            return first
        again = self._run_baselines(problem, platform, busy, ref, exclusive=True, unseen=unseen)
        return noise.retried(first, again)

    def _run_baselines(
        self,
        problem: Problem,
        platform: Platform,
        kinds: tuple[str, ...],
        ref: Reference,
        exclusive: bool = False,
        unseen: tuple[Problem, Reference] | None = None,
    ) -> list[Baseline]:
        """`exclusive`: the device lock held so for the whole child, not only for its timed
        runs (nothing else of ours beside it); `unseen`: the problem at its unseen sizes and
        their reference, the kinds checked there too."""
        work = Path(tempfile.mkdtemp(prefix="kforge-base-"))
        # the kinds are checked against the reference (peers.py) where the parent holds it;
        # a streamed reference's are not (a reduced kind is then no peer: peers.refusal)
        stream = ref.streamed is not None
        checked = ""
        if not stream:
            checked = ref.numerics.save_for_child(ref.outputs, ref.buffers, ref.scales, work)
        fields, state = noise.unseen_job(unseen, work)  # and at the unseen sizes alike
        held = Footprint.largest(ref.footprint, unseen[1].footprint if fields else None)
        job = self._job("baseline", problem, platform, work, held, stream,
                        baseline_kinds=kinds, reference_path=checked,
                        skip_trials=ref.numerics.dropped, **fields)  # fmt: skip
        lock = self._lock(job.device)  # held shared by _child

        def alone(timing: bool) -> None:  # the timed runs alone on the device (a spare
            lock.hold(exclusive=timing or exclusive)  # warming up holds it shared: standby.py)

        try:
            with self._child(job, work, platform, exclusive=exclusive) as child:
                timer = noise.BaselineTimer(
                    kinds,
                    self.config.baseline_spread_limit,
                    self.config.baseline_tries,
                    platform.timing,
                    state,
                )
                timer.drive(child, alone, lock.resume_work, lock.step_aside)
            assert child.exit is not None
            return timer.results(f"{describe_exit(child.exit)}: {child.exit.output[-1500:]}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
