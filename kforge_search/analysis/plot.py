"""The visual profile: a roofline (left) and the last call's kernel timeline (right), one PNG.

The roofline places the candidate at its arithmetic intensity (FLOPs over the bytes that
must move) and achieved TFLOP/s, under the device's memory slope and the compute ceilings of
the precisions; the timeline shows host launches and device kernels from the call's start,
so gaps and serial launches are visible at a glance. Rendered off-screen (Agg).
"""

from __future__ import annotations

import io

from kforge_search.analysis.rules import Figures
from kforge_search.analysis.work import Work
from kforge_search.evaluator.profile import Profile
from kforge_search.hardware import Peaks

CEILINGS = ("ieee", "tf32x3", "bf16x3", "tf32", "bf16")


def render(
    profile: Profile,
    work: Work | str,
    peaks: Peaks | None,
    figures: Figures,
    title: str,
    precision: str = "",
) -> bytes:
    """PNG bytes of the two panels."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2), dpi=90)
    roof, timeline = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.4]})
    _roofline(roof, work, peaks, figures, precision)
    _timeline(timeline, profile)
    fig.suptitle(title[:100], fontsize=10)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return out.getvalue()


def _roofline(ax, work: Work | str, peaks: Peaks | None, f: Figures, precision: str) -> None:
    ax.set_title("roofline", fontsize=9)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("FLOP per byte")
    ax.set_ylabel("TFLOP/s")
    if not isinstance(work, Work) or peaks is None or work.min_bytes <= 0:
        ax.text(0.5, 0.5, "work or peaks unknown", ha="center", transform=ax.transAxes)
        return
    intensity = max(work.flops / work.min_bytes, 1e-3)
    xs = [min(intensity / 100, 0.01), max(intensity * 100, 1e4)]
    bw = peaks.mem_gbs / 1e3  # TB/s: TFLOP/s per FLOP/byte
    for name in CEILINGS if peaks.device != "cpu" else ("ieee",):
        top = peaks.tflops(name)
        ax.plot(xs, [min(top, bw * x) for x in xs], lw=1, label=f"{name} {top:.0f}")
        ax.plot([top / bw, xs[1]], [top, top], lw=1, color=ax.lines[-1].get_color())
    if f.tflops is not None and f.tflops > 0:
        ax.scatter([intensity], [f.tflops], color="black", zorder=5)
        label = f"this kernel ({precision or 'fp32'}): {f.tflops:.1f} TFLOP/s"
        ax.annotate(label, (intensity, f.tflops), fontsize=8, xytext=(4, -12),
                    textcoords="offset points")  # fmt: skip
    elif f.gbs is not None:
        ax.axhline(1e-3, lw=0)
        ax.text(0.02, 0.02, f"no FLOPs counted; {f.gbs:.0f} GB/s achieved", fontsize=8,
                transform=ax.transAxes)  # fmt: skip
    ax.legend(fontsize=7, loc="lower right")


def _timeline(ax, profile: Profile) -> None:
    ax.set_title(f"one call: {profile.launches_per_call:g} launches", fontsize=9)
    ax.set_xlabel("microseconds from the call's start")
    lanes = ("host", "device") if profile.device == "cuda" else ("host",)
    ax.set_yticks(range(len(lanes)), labels=[f"{lane}" for lane in lanes])
    names = sorted({s.name for s in profile.timeline})
    colors = {n: f"C{i % 10}" for i, n in enumerate(names)}
    for span in profile.timeline:
        y = lanes.index(span.lane) if span.lane in lanes else 0
        ax.barh(y, max(span.dur_us, 0.5), left=span.start_us, height=0.6, color=colors[span.name])
    for name in names[:8]:
        ax.barh([], [], color=colors[name], label=name.lstrip("_")[:40] or name)  # "_x": unlisted
    if names:
        ax.legend(fontsize=7, loc="upper right")
    ax.set_xlim(left=0)
