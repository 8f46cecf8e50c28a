"""The evaluator's configuration (EvalConfig): trials, timing, limits, baselines, and how
much of the machine's memory the references it keeps may take (cached_share)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from kforge_search.evaluator import baselines as noise
from kforge_search.evaluator import footprint, peers
from kforge_search.evaluator.policy import get_policy
from kforge_search.evaluator.sandbox import Limits


def _default_memory_mb() -> int:
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    return int(min(32 * 1024, total * 0.6))


def _default_keep_mb() -> int:
    """A reference whose trials' outputs and float64 copies take more streams (footprint.
    streamed): 5% of the machine (6.4 GiB of 128)."""
    return int(CACHED_SHARE * footprint.machine_bytes() / 2**20)


def _zygote_default() -> bool:
    """On, unless $KFORGE_ZYGOTE=0."""
    return os.environ.get("KFORGE_ZYGOTE", "").strip() != "0"


def _timed_check_in_oracle_default() -> bool:
    """On, unless $KFORGE_TIMED_CHECK_IN_ORACLE=0 (its A/B on an H200: call 40 of
    docs/results/h200-2026-11-29b)."""
    return os.environ.get("KFORGE_TIMED_CHECK_IN_ORACLE", "").strip() != "0"


def _trials_in_oracle_default() -> bool:
    """Off, unless $KFORGE_TRIALS_IN_ORACLE=1: measured on an H200, it did not pay
    (oracle_held.py; calls 45-48 of docs/results/h200-2026-11-29d)."""
    return os.environ.get("KFORGE_TRIALS_IN_ORACLE", "").strip() == "1"


CACHED_SHARE = 0.05  # of the machine's memory: references kept beyond the two newest
NODE_CACHED_SHARE = 0.4  # what all the evaluators of one machine keep together, at most


def cached_share(sharers: int) -> float:
    """One evaluator's share of the machine's memory for the references it keeps (and the
    size above which a reference streams), when `sharers` evaluators share the machine: an
    8-GPU node with 8 actors per GPU would otherwise keep 64 x 5%."""
    return min(CACHED_SHARE, NODE_CACHED_SHARE / max(1, sharers))


@dataclass(frozen=True)
class EvalConfig:
    policy: str = "strict"
    trials: int = 5
    seed: int = 2024
    warmup: int = 10
    timed_runs: int = 50
    baselines: tuple[str, ...] = ("eager", "compile")
    # each baseline also at the platform's reduced precision (TF32 on CUDA, bf16 matmuls on
    # CPU), a peer where the policy admits it (evaluator/peers.py)
    reduced_precision: bool = True
    memory_limit_mb: int = field(default_factory=_default_memory_mb)
    # a reference's trials' outputs and float64 copies past this: not kept, recomputed one
    # trial at a time by its oracle when compared (footprint.streamed, trial_check.py)
    reference_keep_mb: int = field(default_factory=_default_keep_mb)
    output_limit_bytes: int = 32 * 2**20
    setup_timeout_s: float = 180.0
    build_timeout_s: float = 600.0
    verify_timeout_s: float = 120.0
    time_timeout_s: float = 300.0
    baseline_timeout_s: float = 900.0
    # a problem's baselines measured beside its first candidate, not after it (pipeline.py)
    baselines_ahead: bool = True
    check_unseen: bool = True  # also verify at the problem's "unseen" size set
    spare_child: bool = True  # keep a warm child ready for the next job (evaluator/spare.py)
    # spares forked from a warm zygote (zygote.py; $KFORGE_ZYGOTE=0 turns it off). H100,
    # `kforge bench --throughput --duration 2.5`: CPU-s per evaluation 11.69 -> 9.12
    zygote: bool = field(default_factory=_zygote_default)
    compare_on_device: bool = True  # outputs compared on the accelerator (verify.placed)
    # a held reference's trials stay there between candidates (resident.py)
    resident_references: bool = True
    # the chosen timed runs are compared in the oracle against a held reference too, as
    # against a streamed one (Job.share_timed): on a CUDA device their outputs go there as
    # CUDA IPC handles and no file of outputs is written on either side (elsewhere as host
    # copies: the oracle writes none). Through files, the check of 04_gemm_mish_hardtanh's 6
    # chosen 64 MiB outputs crossed the disk four times (H200, budget 16: "time-burst" 3-4 s
    # of a 16 s evaluation). In the oracle (H200, `bench --throughput`, 8 per GPU, one
    # machine): "time-burst" 2.62 -> 0.64 s an evaluation, 54.4 -> 59.2 a GPU-minute steady
    timed_check_in_oracle: bool = field(default_factory=_timed_check_in_oracle_default)
    # a held reference's verification trials are compared in its oracle too, on a CUDA
    # device: the candidate's outputs go there as CUDA IPC handles, the oracle keeps the
    # reference's trials on the device (oracle_held.py); off (the default, measured: it
    # saved 4% of the candidates' time and started more oracles, and the bench's wall did
    # not move): the parent compares them, read from the candidate's files
    # ($KFORGE_TRIALS_IN_ORACLE=1 turns it on)
    trials_in_oracle: bool = field(default_factory=_trials_in_oracle_default)
    max_oracles: int = 4  # live oracles (reference children kept to check timed runs)
    # evaluators sharing this machine's memory (cached_share): the references each keeps
    host_sharers: int = 1
    # torch.compile's compile workers in a baseline child (TORCHINDUCTOR_COMPILE_THREADS);
    # 0: torch's default, one per core: 8 actors sharing a GPU on 16 cores started 128
    compile_threads: int = 0
    # references read from, and stored to, the node's disk (reference_store.py); off: each
    # evaluator runs its own
    share_references: bool = True
    profile: bool = False  # profile verified candidates (advice for the agents, not reward)
    ncu: bool = True  # with profile, on CUDA: Nsight Compute's metrics too, where ncu runs
    profile_timeout_s: float = 180.0
    # verify/time/unseen limits: max(floor, factor x the reference's time per call x calls),
    # at most the limits above (evaluator/limits.py); factor 0: the limits above as they are
    limit_factor: float = 50.0
    limit_floor_s: float = 5.0
    baseline_spread_limit: float = noise.SPREAD_LIMIT  # p80/p20 above it: timed again
    baseline_tries: int = 3  # at most this many timings of one noisy baseline
    # Python candidates: the static import allowlist and introspection rules, and the runtime
    # audit hook (imports.py, introspection.py, pyaudit.py); off only to test the defences
    # behind them with candidates they would stop first
    python_guards: bool = True

    def __post_init__(self) -> None:
        get_policy(self.policy)
        if self.trials < 5:
            raise ValueError(f"trials={self.trials}: verification needs at least 5 trials")
        if self.max_oracles < 1:
            raise ValueError(f"max_oracles={self.max_oracles}: need >= 1")
        if self.host_sharers < 1:
            raise ValueError(f"host_sharers={self.host_sharers}: need >= 1")
        if self.compile_threads < 0:
            raise ValueError(f"compile_threads={self.compile_threads}: need >= 0 (0: torch's)")
        if self.timed_runs < 1 or self.warmup < 0:
            raise ValueError(f"timed_runs={self.timed_runs}, warmup={self.warmup}: need >= 1, >= 0")
        unknown = set(self.baselines) - set(peers.MODES)
        if unknown:
            raise ValueError(f"unknown baselines {sorted(unknown)}: use eager and/or compile")
        if self.limit_factor < 0 or self.limit_floor_s <= 0:
            raise ValueError(
                f"limit_factor={self.limit_factor}, limit_floor_s={self.limit_floor_s}: "
                "need a factor >= 0 (0: fixed limits) and a floor > 0 s"
            )
        if self.baseline_spread_limit < 1 or self.baseline_tries < 1:
            raise ValueError(
                f"baseline_spread_limit={self.baseline_spread_limit}, baseline_tries="
                f"{self.baseline_tries}: need a spread limit >= 1 (p80/p20) and >= 1 try"
            )

    def unseen_sizes(self, problem: Any) -> Any:
        """The Problem at its unseen sizes where candidates (and the peers) are checked there
        too: asked (`check_unseen`) and the problem has them; else None."""
        sets = dict(problem.size_sets)
        if not self.check_unseen or "unseen" not in sets or problem.size_set == "unseen":
            return None
        return problem.resized("unseen")

    def limits(self) -> Limits:
        return Limits(
            stage_timeouts_s=(
                ("setup", self.setup_timeout_s),
                ("build", self.build_timeout_s),
                ("verify", self.verify_timeout_s),
                ("unseen", self.build_timeout_s + self.verify_timeout_s),
                ("reference", self.verify_timeout_s + self.setup_timeout_s),
                ("oracle", self.verify_timeout_s),
                ("time", self.time_timeout_s),
                ("baseline", self.baseline_timeout_s),
                ("profile", self.profile_timeout_s),
            ),
            memory_mb=self.memory_limit_mb,
            output_bytes=self.output_limit_bytes,
        )
