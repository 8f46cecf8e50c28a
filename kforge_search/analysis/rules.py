"""The rule-based analysis: a profile, the problem's work and the device's peaks turned into
a text digest (figures an agent can act on), a bottleneck and suggestions with an expected
gain. Always computed; passed to the LLM analyst as its starting point, and used alone when
no LLM is configured.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from kforge_search.analysis.work import Work
from kforge_search.evaluator.profile import NcuKernel, Profile
from kforge_search.hardware import Peaks

BOTTLENECKS = ("launch-overhead", "memory", "compute", "latency", "parallelism", "unknown")

# ncu names (section metrics, with units as ncu prints them) the digest reads.
SM_THROUGHPUT = "Compute (SM) Throughput [%]"
MEM_THROUGHPUT = "Memory Throughput [%]"
OCCUPANCY = "Achieved Occupancy [%]"
DURATION_NS = ("Duration [ns]", "Duration [us]", "Duration [ms]")
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
TENSOR_PREFIX = "sm__pipe_tensor_op_"


@dataclass(frozen=True)
class Suggestion:
    title: str
    detail: str
    expected_gain: str  # e.g. "up to 1.8x", with the reason in `detail`


@dataclass(frozen=True)
class Analysis:
    bottleneck: str  # one of BOTTLENECKS
    summary: str  # one or two sentences
    suggestions: tuple[Suggestion, ...]
    agent: str = "rules"  # "rules" or "llm"
    model: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    images: int = 0  # images sent with the request (the visual-profiler path)

    def __post_init__(self) -> None:
        if self.bottleneck not in BOTTLENECKS:
            raise ValueError(f"bottleneck {self.bottleneck!r}: use one of {BOTTLENECKS}")

    def suggestions_json(self) -> str:
        return json.dumps([asdict(s) for s in self.suggestions])

    def text(self) -> str:
        """For a prompt: the bottleneck, then one line per suggestion."""
        lines = [f"Bottleneck: {self.bottleneck}. {self.summary}"]
        for i, s in enumerate(self.suggestions, 1):
            lines.append(f"{i}. {s.title} (expected: {s.expected_gain}): {s.detail}")
        return "\n".join(lines)


@dataclass(frozen=True)
class Figures:
    """What the rules decide on, derived once."""

    ms: float  # time per call (the evaluator's p50, or the profile's wall clock)
    tflops: float | None  # achieved
    gbs: float | None  # achieved, counting each input, parameter and output once
    compute_ms: float | None  # the roofline's compute bound at the precision
    memory_ms: float | None  # and memory bound
    kernel_share: float  # summed kernel time over the call's wall clock
    launches: float

    @property
    def bound_ms(self) -> float | None:
        known = [t for t in (self.compute_ms, self.memory_ms) if t is not None]
        return max(known) if known else None

    @property
    def roofline(self) -> float | None:
        bound = self.bound_ms
        return bound / self.ms if bound and self.ms > 0 else None


def figures(
    profile: Profile, work: Work | str, peaks: Peaks | None, precision: str, ms: float | None
) -> Figures:
    wall_ms = profile.wall_us_per_call / 1e3
    t = ms if ms and ms > 0 else wall_ms
    counted = isinstance(work, Work)
    tflops = work.flops / (t * 1e-3) / 1e12 if counted and work.flops > 0 and t > 0 else None
    gbs = work.min_bytes / (t * 1e-3) / 1e9 if counted and t > 0 else None
    compute_ms = memory_ms = None
    if counted and peaks is not None:
        if work.flops > 0:
            compute_ms = work.flops / (peaks.tflops(precision or "ieee") * 1e12) * 1e3
        memory_ms = work.min_bytes / (peaks.mem_gbs * 1e9) * 1e3
    share = profile.kernel_us_per_call / profile.wall_us_per_call if profile.wall_us_per_call else 0
    return Figures(
        t, tflops, gbs, compute_ms, memory_ms, min(share, 1.0), profile.launches_per_call
    )


def _ncu_line(kernel: NcuKernel) -> str:
    parts = []
    for label, key in (("SM", SM_THROUGHPUT), ("memory", MEM_THROUGHPUT), ("occupancy", OCCUPANCY)):
        if (v := kernel.get(key)) is not None:
            parts.append(f"{label} {v:.0f}%")
    tensor = [v for k, v in kernel.metrics if k.startswith(TENSOR_PREFIX)]
    if tensor:
        parts.append(f"tensor pipes {max(tensor):.0f}%")
    stalls = top_stalls(kernel)
    if stalls:
        parts.append("stalls: " + ", ".join(f"{n} {v:.1f}" for n, v in stalls))
    return f"  - {kernel.name[:60]}: " + ", ".join(parts)


def top_stalls(kernel: NcuKernel, n: int = 3) -> list[tuple[str, float]]:
    """The main stall reasons (warps stalled per issued instruction), largest first."""
    stalls = [
        (k.removeprefix(STALL_PREFIX).split("_per_issue")[0], v)
        for k, v in kernel.metrics
        if k.startswith(STALL_PREFIX) and "not_issued" not in k
    ]
    return sorted(stalls, key=lambda kv: -kv[1])[:n]


def digest(
    profile: Profile,
    work: Work | str,
    peaks: Peaks | None,
    precision: str,
    ms: float | None,
    meaningful: bool = True,
) -> str:
    """The profile digest: figures first, then the hot kernels, ncu and CPU counters."""
    f = figures(profile, work, peaks, precision, ms)
    lines = [f"- {f.ms:.4f} ms per call; {f.launches:g} kernel launches per call"]
    if not meaningful:
        lines.append("- timed in an interpreter: times say nothing about the real kernel")
    if f.tflops is not None:
        lines.append(f"- achieved {f.tflops:.2f} TFLOP/s" + _of(f.compute_ms, f.ms, "compute"))
    if f.gbs is not None:
        lines.append(
            f"- achieved {f.gbs:.1f} GB/s (each tensor once)" + _of(f.memory_ms, f.ms, "memory")
        )
    if f.roofline is not None:
        lines.append(f"- {100 * f.roofline:.0f}% of the roofline at {precision or 'fp32'}")
    if isinstance(work, str):
        lines.append(f"- {work}")
    where = "device" if profile.device == "cuda" else "launch calls"
    lines.append(f"- kernels take {100 * f.kernel_share:.0f}% of the call's wall clock ({where})")
    for k in profile.kernels[:5]:
        per = k.total_us / max(profile.calls, 1)
        lines.append(f"  - {k.name[:60]} ({k.where}): {per:.1f} us/call, {k.calls} launches")
    if profile.ncu:
        lines.append("- Nsight Compute, per kernel:")
        lines += [_ncu_line(k) for k in profile.ncu[:5]]
    if profile.counters:
        shown = ", ".join(f"{k} {v:.3g}" for k, v in profile.counters)
        lines.append(f"- CPU counters per call: {shown}")
    lines += [f"- note: {n}" for n in profile.notes]
    return "\n".join(lines)


def _of(bound_ms: float | None, ms: float, what: str) -> str:
    if bound_ms is None or ms <= 0:
        return ""
    return f", {100 * bound_ms / ms:.0f}% of the {what} peak"


def analyze(
    profile: Profile,
    work: Work | str,
    peaks: Peaks | None,
    precision: str,
    ms: float | None,
    precisions: tuple[str, ...] = ("ieee",),
    cpus: int = 1,
) -> Analysis:
    """Bottleneck and suggestions by rule. `precisions`: those the numeric policy admits."""
    f = figures(profile, work, peaks, precision, ms)
    out: list[Suggestion] = []
    bottleneck = "unknown"
    if profile.device == "cuda" and f.launches > 1 and f.kernel_share < 0.6:
        bottleneck = "launch-overhead"
        gain = 1 / max(f.kernel_share, 0.05)
        out.append(
            Suggestion(
                "Fuse the launches into fewer kernels",
                f"{f.launches:g} launches per call and the kernels keep the GPU busy only "
                f"{100 * f.kernel_share:.0f}% of the call: the rest is launch latency and gaps",
                f"up to {gain:.1f}x",
            )
        )
    elif f.memory_ms is not None:  # no FLOPs counted (a softmax, a copy): memory
        bottleneck = "compute" if (f.compute_ms or 0.0) >= f.memory_ms else "memory"
    if profile.device == "cpu" and cpus > 1:
        busy = profile.counter("busy_threads")
        if busy is not None and busy < 0.5 * cpus:
            bottleneck = "parallelism" if bottleneck in ("unknown", "compute") else bottleneck
            out.append(
                Suggestion(
                    "Use every core",
                    f"{busy:.1f} of {cpus} CPUs busy on average: parallelize the outer loop "
                    "(OpenMP) over rows or output tiles",
                    f"up to {cpus / max(busy, 1.0):.1f}x",
                )
            )
    for kernel in profile.ncu[:1]:
        sm, mem = kernel.get(SM_THROUGHPUT), kernel.get(MEM_THROUGHPUT)
        if sm is not None and mem is not None and max(sm, mem) < 40:
            bottleneck = "latency" if bottleneck != "launch-overhead" else bottleneck
            stalls = ", ".join(n for n, _ in top_stalls(kernel)) or "unknown"
            occ = kernel.get(OCCUPANCY)
            occ_text = f"; occupancy {occ:.0f}%" if occ is not None else ""
            out.append(
                Suggestion(
                    "Hide latency",
                    f"SM {sm:.0f}% and memory {mem:.0f}% of peak{occ_text}; main stalls: "
                    f"{stalls}. More tiles in flight (more stages, more warps or smaller "
                    "tiles for more CTAs), or split-K when the grid is smaller than the GPU",
                    f"up to {100 / max(sm, mem, 1):.1f}x",
                )
            )
    if bottleneck == "compute" and f.compute_ms:
        faster = [
            p for p in ("tf32x3", "bf16x3", "tf32", "bf16") if p in precisions and p != precision
        ]
        if faster and precision in ("", "ieee", "fp32", "tf32x3"):
            out.append(
                Suggestion(
                    f"Run the GEMM on tensor cores ({faster[-1]})",
                    f"compute-bound at {precision or 'fp32'}; the policy admits "
                    f"{', '.join(faster)}, whose peak is higher",
                    f"up to {_peak_ratio(precision, faster[-1]):.1f}x on the GEMM",
                )
            )
        if f.roofline is not None and f.roofline < 0.7:
            out.append(
                Suggestion(
                    "Retune the GEMM tiles",
                    f"{100 * f.roofline:.0f}% of the compute roofline: try larger tiles "
                    "(128x256), more pipeline stages, grouped tile order for L2 reuse",
                    f"up to {0.8 / f.roofline:.1f}x",
                )
            )
    if bottleneck == "memory" and f.roofline is not None and f.roofline < 0.7:
        out.append(
            Suggestion(
                "Move fewer bytes",
                f"memory-bound at {100 * f.roofline:.0f}% of the bandwidth roofline: fuse the "
                "passes so each tensor is read once, vectorize loads, avoid intermediates",
                f"up to {0.85 / f.roofline:.1f}x",
            )
        )
    summary = _summary(bottleneck, f, precision)
    return Analysis(bottleneck, summary, tuple(out))


def _peak_ratio(have: str, want: str) -> float:
    ratio = {"ieee": 1.0, "fp32": 1.0, "": 1.0, "tf32x3": 2.5, "bf16x3": 4.9, "tf32": 7.4,
             "tf32rn": 7.4, "bf16": 14.8}  # fmt: skip
    return ratio.get(want, 1.0) / ratio.get(have, 1.0)


def _summary(bottleneck: str, f: Figures, precision: str) -> str:
    roof = (
        f" at {100 * f.roofline:.0f}% of the roofline ({precision or 'fp32'})" if f.roofline else ""
    )
    what = {
        "launch-overhead": "Launch latency and gaps between kernels dominate",
        "memory": "Bound by memory bandwidth",
        "compute": "Bound by arithmetic throughput",
        "latency": "Neither compute nor memory is busy: latency-bound",
        "parallelism": "Too few cores busy",
        "unknown": "No work count or peaks to place it on the roofline",
    }[bottleneck]
    return f"{what}{roof}; {f.ms:.4f} ms per call."
