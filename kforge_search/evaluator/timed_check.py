"""The parent's checks of a candidate's timed runs (the child's side: timed_runs.py).

- The draw: timing inputs come from fresh OS randomness, sent once the candidate is loaded
  and verified.
- After the fact: the whole outputs of timed runs and burst calls chosen (from OS
  randomness) after all of them ran are compared with the oracle's (oracle.py).
- The parent's clock: a burst of back-to-back calls, each on its own inputs, is timed with
  the parent's own clock from "go" to "burst". Per call it must not exceed what the child's
  timing claims by more than a gross margin. The margin is wide on purpose: a burst also
  pays the host's launch latency, which the CUDA-event timing leaves out by design
  (timing.py), so this catches a forged or frozen clock, not a finer bending of it.
"""

from __future__ import annotations

import math
import secrets

from kforge_search.evaluator.result import TimingStats

REVEAL_RUNS = 4  # timed runs whose whole outputs are checked, chosen after they all ran
REVEAL_CALLS = 2  # burst calls checked likewise
REVEAL_BYTES = 1 << 30  # at most this much of outputs checked (they cross the disk twice)
BURST_TARGET_MS = 50.0  # the burst's length by the timing's own claim
BURST_MIN_CALLS, BURST_MAX_CALLS = 3, 32
WALL_FACTOR = 4.0  # a burst call may take this many times the claimed time ...
WALL_PER_CALL_MS = 0.5  # ... plus this (the host's launch latency, Python's own calls) ...
WALL_FIXED_MS = 5.0  # ... plus this once (the pipe both ways, the final synchronize)
# bursts asked at most, each on a fresh draw, before a slow one is the candidate's. On a
# loaded host (H200, a bench's 12 jobs beside it) right kernels' bursts went over: 32 calls
# of a 0.05 ms kernel in 127 ms (27 allowed), one 3.4 ms call of 6 GiB in 22 ms (19 allowed).
# A forged clock is slow every time, and new inputs leave nothing to replay. The timed runs
# are asked again as often where their host clock shows work the CUDA events did not see
# (outcome.timing_problem): right kernels of 3 ms over 6 GiB took 6.6 and 9.3 ms of wall
# clock a run beside a bench's 28 jobs on 4 H200s; work on a hidden stream is there every time
WALL_ATTEMPTS = 3


def draw() -> int:
    """The timing inputs' seed for one candidate: fresh OS randomness."""
    return secrets.randbits(62)


def claimed_ms(timing: TimingStats) -> float:
    """What the child's timing says one call takes (device time, or the host's where it
    saw more)."""
    return max(timing.p50_ms, timing.host_p50_ms)


def burst_calls(timing: TimingStats) -> int:
    wanted = math.ceil(BURST_TARGET_MS / max(claimed_ms(timing), 1e-3))
    return max(BURST_MIN_CALLS, min(BURST_MAX_CALLS, wanted))


def reveal_counts(output_bytes: int) -> tuple[int, int]:
    """How many timed runs and burst calls to check, for outputs of this size (the
    reference's): all of REVEAL_RUNS and REVEAL_CALLS where they fit REVEAL_BYTES, else
    fewer, at least one of each (a 256 MiB output: 3 runs and 1 call)."""
    fits = REVEAL_BYTES // max(output_bytes, 1)
    calls = REVEAL_CALLS if fits >= REVEAL_RUNS + REVEAL_CALLS else 1
    return max(1, min(REVEAL_RUNS, fits - calls)), calls


def choose(count: int, k: int) -> list[int]:
    """k of range(count), chosen from OS randomness (sorted)."""
    return sorted(secrets.SystemRandom().sample(range(count), min(k, count)))


def wall_problem(timing: TimingStats, wall_ms: float, calls: int) -> tuple[str, str] | None:
    """The parent's clock against the child's: a burst far slower than the timing claims."""
    allowed = WALL_FIXED_MS + calls * (WALL_FACTOR * claimed_ms(timing) + WALL_PER_CALL_MS)
    if calls < 1 or wall_ms <= allowed:
        return None
    return (
        "timing:wall-clock",
        f"{calls} back-to-back calls took {wall_ms:.1f} ms by the evaluator's own clock "
        f"({wall_ms / calls:.3f} ms a call), but the timed runs claim {claimed_ms(timing):.3f} "
        "ms a call: the in-process timing was not measuring the real work. Do not touch "
        "clocks or timers; do the work inside forward",
    )
