"""The staged evaluator: static check -> build -> verify -> time (-> profile, when asked).

The reference runs in one child process, the candidate in another; outputs are compared
here in the parent. Every path ends in one frozen EvalResult.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from kforge_search.evaluator import footprint, ncu, tensorfile
from kforge_search.evaluator.baseline_runs import BaselineRuns
from kforge_search.evaluator.baselines import BaselineCache
from kforge_search.evaluator.candidate_drive import CandidateDrive
from kforge_search.evaluator.config import EvalConfig, cached_share
from kforge_search.evaluator.devicelock import LOCK_DIR_ENV, DeviceLock, device_key, lock_folder
from kforge_search.evaluator.footprint import Footprint
from kforge_search.evaluator.job import PROFILE_ENV, Job
from kforge_search.evaluator.limits import candidate_limits
from kforge_search.evaluator.oracle import Oracle, OracleError
from kforge_search.evaluator.oracle_held import HeldRoom
from kforge_search.evaluator.outcome import describe_exit, gist
from kforge_search.evaluator.phases import PhaseClock
from kforge_search.evaluator.profile import Profile
from kforge_search.evaluator.reference import Reference, memory_note, reference_of
from kforge_search.evaluator.reference_store import ReferenceStore, references_to_drop
from kforge_search.evaluator.resident import Resident
from kforge_search.evaluator.result import (
    Artifacts,
    EvalResult,
    Status,
)
from kforge_search.evaluator.sandbox import Child, Limits, make_undumpable
from kforge_search.evaluator.spare import Spares
from kforge_search.evaluator.static_check import excused_names, static_check
from kforge_search.paths import cache_dir, pycache_dir
from kforge_search.platforms import Platform
from kforge_search.problem import DeviceBusy, Problem, ProblemError, source_hash

SPARE_READY_S = 120.0  # a spare not warm by then goes; its job starts a fresh child


class Evaluator(BaselineRuns):
    """Evaluates candidates; caches reference outputs in memory and baselines on disk."""

    def __init__(self, config: EvalConfig | None = None):
        self.config = config or EvalConfig()
        self._references: OrderedDict[str, Reference] = OrderedDict()
        self._oracles: OrderedDict[str, Oracle] = OrderedDict()  # by reference key: oracle.py
        self._unseen_failed: dict[str, str] = {}  # unseen sizes whose reference failed: why
        self._baselines = BaselineCache(cache_dir() / "baselines.json")
        self._stored = ReferenceStore(cache_dir() / "references", cache_dir())
        self._spares = Spares(self.config.zygote)
        # by device key and thread (devicelock.py): a thread's hold is its own, as another
        # process's would be (flock holds belong to the open file, not the process)
        self._locks: dict[tuple[str, int], DeviceLock] = {}
        self._ahead: dict[str, threading.Thread] = {}  # baselines measured ahead, by key
        self._device_ok: bool | None = None  # this process can compare on its accelerator
        self._resident: dict[str, Resident] = {}  # held references' trials, by device
        self._held = HeldRoom()  # what its oracles keep of held references' trials
        make_undumpable()

    def _lock(self, device: str) -> DeviceLock:
        key = device_key(device)
        if (lock := self._locks.get(mine := (key, threading.get_ident()))) is None:
            lock = self._locks[mine] = DeviceLock(key)
        return lock

    def _drop_thread_locks(self) -> None:
        """This thread's device locks, let go and closed (a thread that ends)."""
        me = threading.get_ident()
        for key in [k for k in self._locks if k[1] == me]:
            if (lock := self._locks.pop(key, None)) is not None:  # (close() may have them)
                lock.close()

    # -- children -------------------------------------------------------------------------
    def _timed_runs(self, platform: Platform) -> int:
        return self.config.timed_runs if platform.timing_meaningful else 5

    def _job(
        self,
        mode: str,
        problem: Problem,
        platform: Platform,
        work: Path,
        memory: Footprint | None = None,
        streamed: bool = False,
        **kw: Any,
    ) -> Job:
        """A child's job; `memory`: the footprint its memory limit scales with (footprint.py;
        None: the configured limit, which the reference's child raises once it has measured);
        `streamed`: the problem's reference streams (footprint.streamed)."""
        timed_runs = self._timed_runs(platform)
        job = Job(
            mode=mode,
            problem=problem,
            platform=platform.name,
            device=platform.device_kind,
            timing_method=platform.timing,
            timing_meaningful=platform.timing_meaningful,
            trials=self.config.trials,
            seed=self.config.seed,
            warmup=self.config.warmup if platform.timing_meaningful else 1,
            timed_runs=timed_runs,
            outputs_path=str(work / f"{mode}-outputs.pt"),
            ext_cache=str(cache_dir() / "torch_extensions"),
            memory_limit_mb=self.config.memory_limit_mb,
            python_audit=self.config.python_guards,
            reference_keep_bytes=self._keep_bytes(),
            writable=(
                str(work),
                str(cache_dir() / "torch_extensions"),
                str(cache_dir() / "triton"),
                *filter(None, [os.environ.get(PROFILE_ENV)]),  # only when profiling the harness
            ),
            **kw,
        )
        floor = self.config.memory_limit_mb
        mb = footprint.limit_mb(floor, memory, mode, job.device, job.total_trials, streamed)
        return replace(job, memory_limit_mb=mb)

    @contextlib.contextmanager
    def _child(
        self,
        job: Job,
        work: Path,
        platform: Platform,
        prefix: tuple[str, ...] = (),
        limits: Limits | None = None,
        exclusive: bool = False,
    ) -> Iterator[Child]:
        """The job's child under the device lock: shared (exclusive while it times), or
        `exclusive` throughout (as ncu's), then without a spare: a spare's warm-up holds the
        lock shared (standby.py) and would wait for this hold, its job for the spare."""
        path = work / f"{job.mode}-job.json"
        job.dump(path)
        env = {  # TMPDIR: a spare learns its folder with its job (the job file's folder)
            **dict(platform.env),
            "TRITON_CACHE_DIR": str(cache_dir() / "triton"),
            # bytecode shared by every child (a candidate's child writes none: worker.main)
            "PYTHONPYCACHEPREFIX": str(pycache_dir()),
            LOCK_DIR_ENV: str(lock_folder()),  # a spare holds the device lock too (standby.py)
        }
        if job.mode == "baseline" and self.config.compile_threads > 0:
            env["TORCHINDUCTOR_COMPILE_THREADS"] = str(self.config.compile_threads)
        spares = self.config.spare_child and not prefix and not exclusive
        lock = self._lock(job.device)  # shared, but exclusive while timing (devicelock.py)
        # inside another's hold (an oracle a candidate's check starts): under it, kept after
        outer, label = lock.mode, lock.label
        lock.label = label if outer else f"{job.problem.name}:{job.mode}"  # whose hold it was
        try:
            spare = self._spares.take(job.device, env) if spares and outer != "exclusive" else None
            if spare is not None:  # its warm-up queues behind timings: never waited for under
                lock.step_aside()  # a hold (the hold, the timing and the warm-up would wait
                if not spare.wait_ready(SPARE_READY_S):  # for each other)
                    spare.kill()
                    spare = None
            if outer != "exclusive":  # ncu's replays are timed throughout
                lock.hold(exclusive=exclusive or job.mode == "ncu")
            # the job's memory limit (scaled to the problem's footprint: footprint.py)
            limits = replace(limits or self.config.limits(), memory_mb=job.memory_limit_mb)
            with Child(path, work, limits, {**env, "TMPDIR": str(work)}, prefix,
                       spare=spare) as child:  # fmt: skip
                # on a GPU the next spare warms up beside the candidate (its context is done
                # long before the candidate times); on the CPU its warm-up is the device's
                # work, and the candidate's timing waited for it (2-CPU machine, an interpreter's
                # imports: 1.2 s), so it starts once this child has ended (below)
                if spares and job.mode == "candidate" and job.device.startswith("cuda"):
                    self._spares.prepare(job.device, env)
                yield child
        finally:
            if outer:  # as it was (it let it go: the rest ran beside others' timed runs)
                lock.hold(exclusive=outer == "exclusive")
            else:
                lock.release()
            if spares:  # other modes (and candidates on the CPU): their next spare starts after
                self._spares.prepare(job.device, env)

    def close(self) -> None:
        """Ends the spare child (also ended when this process exits: its stdin closes) and
        lets go of the device locks."""
        self._spares.close()
        self.close_oracles()
        for resident in self._resident.values():
            resident.clear()
        for lock in list(self._locks.values()):
            lock.close()
        self._locks.clear()

    def close_oracles(self) -> None:
        """Ends the live oracles (a bench's problem is done: none is asked again)."""
        for oracle in self._oracles.values():
            oracle.close()
        self._oracles.clear()

    def helper_pids(self) -> list[int]:
        """The evaluator's own idle children (the spare, the oracles), for leak checks."""
        return [*self.spare_pids(), *self.oracle_pids()]

    def spare_pids(self) -> list[int]:
        return self._spares.pids()

    def zygote_pids(self) -> list[int]:  # their own processes, not the spares they forked
        return self._spares.zygote_pids()

    def oracle_pids(self) -> list[int]:
        return [o.pid() for o in self._oracles.values() if o.alive]

    # -- reference ------------------------------------------------------------------------
    def _reference_key(self, problem: Problem, platform: Platform) -> str:
        runs = self._timed_runs(platform)
        return f"{problem.id}|{problem.sizes_key}|{platform.device_kind}|{self.config.seed}|{runs}"

    def reference(self, problem: Problem, platform: Platform, oracle: bool = True) -> Reference:
        """The problem's reference (cached in memory); `oracle`: its child stays, as the
        oracle of candidates' timed runs (oracle.py)."""
        key = self._reference_key(problem, platform)
        if key in self._references:
            self._references.move_to_end(key)
            return self._references[key]
        kept: Oracle | None = None
        shared = self._stored_key(key) if self.config.share_references else ""
        # the node's evaluators compute it once (reference_store.py)
        with self._stored.computing(shared) if shared else contextlib.nullcontext():
            stored = self._stored.load(shared) if shared else None
            reference = Reference(**stored) if stored is not None else None
            if reference is None:  # its oracle starts when a candidate's timed runs ask
                work = Path(tempfile.mkdtemp(prefix="kforge-ref-"))
                saved: tensorfile.Read | None = None
                try:
                    reference, kept, saved = self._run_reference(problem, platform, work, oracle)
                    if shared:  # its child's file becomes the stored one (reference_store)
                        self._stored.save(shared, reference, saved)
                finally:
                    if kept is None:
                        shutil.rmtree(work, ignore_errors=True)
                    elif saved is not None:  # the oracle's folder keeps no copy of it
                        saved.path.unlink(missing_ok=True)
        self._references[key] = reference
        budget = max(
            cached_share(self.config.host_sharers) * footprint.machine_bytes(),
            self._keep_bytes(),
        )
        sizes = [r.held_bytes for r in self._references.values()]
        for _ in range(references_to_drop(sizes, budget)):
            self._references.popitem(last=False)
        if kept is not None:
            self._keep_oracle(key, kept)
        return reference

    def _keep_bytes(self) -> int:
        """Above this a reference streams (its trials one at a time): the configured size,
        at most this evaluator's share of the machine where several share it."""
        configured = self.config.reference_keep_mb * 2**20
        if self.config.host_sharers == 1:  # alone on the machine: what the user configured
            return configured
        share = int(cached_share(self.config.host_sharers) * footprint.machine_bytes())
        return min(configured, share)

    def _stored_key(self, key: str) -> str:
        """The key of a reference on disk (reference_store.py): the in-memory one, the
        trials, the torch that computes it and the node (its device)."""
        import socket

        import torch

        host = socket.gethostname()  # a cache folder shared by nodes: each its own device's
        return f"{key}|{self.config.trials}|{torch.__version__}|{host}"

    def _keep_oracle(self, key: str, oracle: Oracle) -> None:
        if (old := self._oracles.pop(key, None)) is not None:
            old.close()
        self._oracles[key] = oracle
        while len(self._oracles) > self.config.max_oracles:
            self._oracles.popitem(last=False)[1].close()

    def _trim_held(self, asked: Oracle) -> None:
        """Other oracles keeping held references' trials closed beyond their room (HeldRoom)."""
        holding = [o for o in self._oracles.values() if o.held_bytes and o.alive]
        for oracle in self._held.to_close(holding, asked):
            oracle.close()

    def _oracle(self, problem: Problem, platform: Platform) -> Oracle:
        """The live oracle of the problem's reference, started afresh where it has gone."""
        key = self._reference_key(problem, platform)
        if (oracle := self._oracles.get(key)) is not None and oracle.alive:
            self._oracles.move_to_end(key)
            self._trim_held(oracle)
            return oracle
        work = Path(tempfile.mkdtemp(prefix="kforge-oracle-"))
        cached = self._references.get(key)
        job = self._job("oracle", problem, platform, work, cached.footprint if cached else None,
                        cached is not None and cached.streamed is not None)  # fmt: skip
        try:
            with self._child(job, work, platform) as child:
                while (event := child.next_event()) is not None:
                    if event["type"] == "oracle-ready":
                        child.keep_alive = True
                        oracle = Oracle(child, work)
                        self._keep_oracle(key, oracle)
                        return oracle
                    if event["type"] == "fail":
                        break
            why = child.exit.output[-1500:] if child.exit else ""
            raise OracleError(f"the oracle of {problem.name} did not start: {why}")
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise

    def _run_reference(
        self, problem: Problem, platform: Platform, work: Path, keep: bool
    ) -> tuple[Reference, Oracle | None, tensorfile.Read]:
        """The reference, its oracle where it stays, and its child's file as read (hashed
        where references are shared: the store keeps the file, reference_store.py)."""
        job = self._job("reference", problem, platform, work)
        info: dict[str, Any] = {}
        measured: Footprint | None = None
        lock = self._lock(job.device)  # held shared by _child
        started = time.monotonic()
        with self._child(job, work, platform) as child:
            while (event := child.next_event()) is not None:
                if event["type"] == "pause":  # between trials: a waiting timing goes first
                    child.resume_after(lock.yield_to_timing)
                elif event["type"] == "info":
                    info = event
                elif event["type"] == "footprint" and event.get("footprint"):
                    # the child's limit, scaled to what the problem holds (footprint.py)
                    measured = Footprint.from_dict(event["footprint"])
                    streams = footprint.streamed(measured, job.total_trials,
                                                 job.reference_keep_bytes)  # fmt: skip
                    mb = footprint.limit_mb(job.memory_limit_mb, measured, job.mode, job.device,
                                            job.total_trials, streams)  # fmt: skip
                    child.limits = replace(child.limits, memory_mb=mb)
                elif event["type"] == "fail":
                    failed = DeviceBusy if event.get("busy") else ProblemError
                    raise failed(f"{problem.name}: {event['message']}")
                elif event["type"] == "reference":
                    hashed = self.config.share_references
                    reference, saved = reference_of(event, job.outputs_path, info, measured,
                                                    hashed, started)  # fmt: skip
                    # a streamed reference's trials come from its oracle: it stays
                    keep = keep or reference.streamed is not None
                    child.keep_alive = keep  # it now waits to serve as the oracle
                    return reference, Oracle(child, work) if keep else None, saved
        assert child.exit is not None
        raise ProblemError(
            f"the reference of {problem.name} failed ({describe_exit(child.exit)}"
            f"{memory_note(child, measured, problem)}):\n{child.exit.output[-4000:]}"
        )

    # -- candidates -----------------------------------------------------------------------
    def evaluate_source(
        self,
        source: str,
        problem: Problem,
        platform: Platform,
        *,
        unseen_below_ms: float | None = None,
    ) -> EvalResult:
        work = Path(tempfile.mkdtemp(prefix="kforge-src-"))
        try:
            path = work / "candidate.py"
            path.write_text(source)
            return self.evaluate(path, problem, platform, unseen_below_ms=unseen_below_ms)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def evaluate(
        self,
        candidate: str | Path,
        problem: Problem,
        platform: Platform,
        *,
        unseen_below_ms: float | None = None,
    ) -> EvalResult:
        """`candidate` verified, timed (and profiled) and checked at the unseen sizes; with
        `unseen_below_ms`, only a candidate timed faster than that is checked there
        (candidate_drive.CandidateDrive)."""
        if not platform.runnable:
            raise ValueError(f"platform {platform.name} is declared only and cannot run here")
        started = time.monotonic()
        source = Path(candidate).read_text()
        base = EvalResult(
            status=Status.INFRA_ERROR,
            message="",
            stage="static_check",
            problem_id=problem.id,
            problem_name=problem.name,
            platform=platform.name,
            policy=self.config.policy,
            candidate_hash=source_hash(source, platform.name),
            sizes=tuple(sorted(problem.sizes.items())),
        )
        result = self._evaluate(Path(candidate), source, problem, platform, base, unseen_below_ms)
        return replace(result, duration_s=round(time.monotonic() - started, 3))

    def _evaluate(
        self,
        path: Path,
        source: str,
        problem: Problem,
        platform: Platform,
        base: EvalResult,
        unseen_below_ms: float | None,
    ) -> EvalResult:
        clock = PhaseClock()
        with clock.timed("static_check"):
            check = static_check(
                source,
                platform.language,
                excused_names(problem.source),
                python_rules=self.config.python_guards,
            )
        if not check.ok:
            what = {
                Status.COMPILE_ERROR: "the candidate cannot run as a module of its own",
                Status.REJECTED: "the static check rejected the candidate",
            }[check.status]
            return replace(
                base,
                status=check.status,
                message=f"{what}:\n{check.message}",
                artifacts=Artifacts(reasons=check.reasons),
                phases=clock.phases(),
            )
        with clock.timed("reference"):  # no time once cached
            ref = self.reference(problem, platform)
            unseen, unchecked = self._unseen(problem, platform)
        self._baselines_ahead(problem, platform, ref)
        base = replace(
            base,
            device_name=ref.device_name,
            torch_version=ref.torch_version,
            warnings=(*ref.warnings, *filter(None, [unchecked])),
        )
        work = Path(tempfile.mkdtemp(prefix="kforge-cand-"))
        cuda = platform.device_kind.startswith("cuda")
        compare_on = self._compare_device(platform.device_kind)
        in_oracle = (
            self._held_in_oracle(ref, compare_on),
            unseen is not None and self._held_in_oracle(unseen[1], compare_on),
        )
        try:
            shutil.copy(path, work / "candidate.py")
            job = self._job(
                "candidate",
                problem,
                platform,
                work,
                Footprint.largest(ref.footprint, unseen[1].footprint if unseen else None),
                ref.streamed is not None or (unseen is not None and unseen[1].streamed is not None),
                candidate_path=str(work / "candidate.py"),
                unseen=unseen[0] if unseen else None,
                unseen_outputs_path=str(work / "unseen-outputs.pt"),
                buffer_names=tuple(
                    sorted({*ref.buffer_names, *(unseen[1].buffer_names if unseen else ())})
                ),
                skip_trials=ref.numerics.dropped,
                unseen_skip_trials=unseen[1].numerics.dropped if unseen else (),
                share_outputs=cuda and (ref.streamed is not None or in_oracle[0]),
                share_unseen=cuda
                and unseen is not None
                and (unseen[1].streamed is not None or in_oracle[1]),
                share_timed=self.config.timed_check_in_oracle,
            )
            unseen_ms = unseen[1].per_call_ms if unseen else 0.0
            limits, used = candidate_limits(
                self.config, job, ref.per_call_ms, unseen_ms, platform.timing_meaningful
            )
            base = replace(base, limits=used)
            with self._child(job, work, platform, limits=limits) as child:
                drive = CandidateDrive(
                    child,
                    job,
                    ref,
                    unseen,
                    lambda: self._oracle(problem, platform),
                    (lambda: self._oracle(unseen[0], platform)) if unseen else None,
                    self._lock(job.device),  # held shared by _child
                    self.config,
                    compare_on,
                    unseen_below_ms,
                    resident=self._resident_on(compare_on),
                    in_oracle=in_oracle,
                )
                result = drive.result(base)
            # the wait for the timing lane (the device lock, exclusive) is its own phase
            waited = drive.lane_wait
            clock.extend((n, s - waited if n == "verify" else s) for n, s in child.phases())
            clock.add("lane_wait", waited)
        finally:
            shutil.rmtree(work, ignore_errors=True)
            self._free_device_memory()
        if result.ok:
            with clock.timed("baselines"):  # no time once cached
                result = replace(result, baselines=self.baselines(problem, platform, ref))
            if tampered := self._baselines.take_tampered():
                said = "; ".join(tampered)
                note = f"baseline cache: entries not sealed by an evaluator, measured again: {said}"
                result = replace(result, warnings=(*result.warnings, note))
            if result.profile is not None and platform.device_kind.startswith("cuda"):
                with clock.timed("ncu"):
                    profile = self._with_ncu(path, problem, platform, result)
                result = replace(result, profile=profile)
        return replace(result, phases=clock.phases())

    def _with_ncu(
        self, path: Path, problem: Problem, platform: Platform, result: EvalResult
    ) -> Profile:
        """The profile with Nsight Compute's metrics of one forward call, where ncu runs."""
        assert result.profile is not None
        if not self.config.ncu:
            return result.profile
        if not ncu.available():
            return replace(result.profile, notes=(*result.profile.notes, "ncu: not on PATH"))
        work = Path(tempfile.mkdtemp(prefix="kforge-ncu-"))
        try:
            shutil.copy(path, work / "candidate.py")
            cached = self._references.get(self._reference_key(problem, platform))
            job = self._job("ncu", problem, platform, work, cached.footprint if cached else None,
                            candidate_path=str(work / "candidate.py"))  # fmt: skip
            report = work / "ncu.csv"
            with self._child(job, work, platform, ncu.command(str(report))) as child:
                # ncu writes its report when the program ends: let it end (killing it at the
                # worker's "ncu" event would leave no report)
                while (event := child.next_event()) is not None:
                    if event["type"] == "fail":
                        break
            text = report.read_text(errors="replace") if report.is_file() else ""
            kernels = ncu.parse(text)
            if not kernels:
                tail = (child.exit.output if child.exit else "")[-300:].strip()
                note = f"ncu gave no metrics: {tail or 'empty report'}"
                return replace(result.profile, notes=(*result.profile.notes, note))
            return replace(result.profile, ncu=kernels)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _unseen(
        self, problem: Problem, platform: Platform
    ) -> tuple[tuple[Problem, Reference] | None, str]:
        """The problem at its unseen sizes and their reference, when the candidate's child
        should also verify there (after timing: it says whether the kernel generalizes); and
        why not, where their reference cannot run (the candidate is judged at its sizes, the
        unseen ones stay unchecked: remembered, not run again for every candidate)."""
        if (unseen := self.config.unseen_sizes(problem)) is None:
            return None, ""
        key = self._reference_key(unseen, platform)
        if key not in self._unseen_failed:
            try:
                return (unseen, self.reference(unseen, platform, oracle=False)), ""
            except ProblemError as exc:
                self._unseen_failed[key] = f"the unseen sizes are not checked: {gist(exc)}"
        return None, self._unseen_failed[key]

    def _free_device_memory(self) -> None:
        """The comparisons' cached accelerator memory, back to the device for the jobs."""
        if self._device_ok:
            import torch

            torch.cuda.empty_cache()

    def _resident_on(self, device: str | None) -> Resident | None:
        """Where held references' trials stay on the comparisons' device (resident.py)."""
        if device is None or not self.config.resident_references:
            return None
        if (resident := self._resident.get(device)) is None:
            resident = self._resident[device] = Resident(device)
        return resident

    def _held_in_oracle(self, ref: Reference, device: str | None) -> bool:
        """Whether a held reference's verification trials are compared in its oracle
        (oracle_held.py): on a CUDA device this process sees, where they fit in what one
        evaluator's oracles keep on it (HeldRoom)."""
        if device is None or ref.streamed is not None or not self.config.trials_in_oracle:
            return False
        return self._held.fits(ref.held_bytes, device)

    def _compare_device(self, device: str) -> str | None:
        """Where this process compares a candidate's outputs with the reference's: the
        job's accelerator, when this process sees it (an evaluator actor is given its GPU);
        else the CPU (None). Comparisons run while the device lock is held shared, never
        beside another evaluator's timed runs (devicelock.py)."""
        if not device.startswith("cuda") or not self.config.compare_on_device:
            return None
        if self._device_ok is None:
            import torch

            self._device_ok = torch.cuda.is_available()
        return device if self._device_ok else None
