"""Nsight Compute for the profile stage: the command that wraps a candidate child, and its
CSV report read back as one NcuKernel per kernel launch of one forward call.

Sections: speed of light (SM and memory throughput), occupancy, warp state (the stall
reasons) and the compute workload; plus the tensor pipes' utilization by regex, so a GPU
that names them differently gives no metric rather than an error. Clocks are left alone
(--clock-control none): the evaluator's timings run at the clocks the user gets.
"""

from __future__ import annotations

import csv
import io
import shutil
from collections import defaultdict

from kforge_search.evaluator.profile import NcuKernel

SECTIONS = ("SpeedOfLight", "Occupancy", "WarpStateStats", "ComputeWorkloadAnalysis")
METRICS = (
    "regex:sm__pipe_tensor_op_.*_cycles_active\\.avg\\.pct_of_peak_sustained_active",
    "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio",
)
MAX_KERNELS = 64  # launches profiled per call at most (each is replayed once per pass)


def available() -> bool:
    return shutil.which("ncu") is not None


def command(log_path: str) -> tuple[str, ...]:
    sections = [arg for s in SECTIONS for arg in ("--section", s)]
    return (
        "ncu",
        "--profile-from-start", "off",
        "--clock-control", "none",
        "--target-processes", "all",
        "--launch-count", str(MAX_KERNELS),
        "--csv", "--page", "details",
        "--log-file", log_path,
        *sections,
        "--metrics", ",".join(METRICS),
    )  # fmt: skip


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def parse(report: str) -> tuple[NcuKernel, ...]:
    """The CSV page 'details': one row per (launch, metric). Lines before the header (ncu's
    own messages) are skipped; metrics without a number (names, enums) are left out."""
    lines = report.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return ()
    rows = csv.DictReader(io.StringIO("\n".join(lines[start:])))
    names: dict[str, str] = {}
    metrics: dict[str, dict[str, float]] = defaultdict(dict)
    for row in rows:
        launch = row.get("ID", "")
        value = _number(row.get("Metric Value", ""))
        if not launch or value is None:
            continue
        names[launch] = row.get("Kernel Name", "") or row.get("Function Name", "")
        unit = row.get("Metric Unit", "")
        key = row.get("Metric Name", "") + (f" [{unit}]" if unit else "")
        metrics[launch][key] = value
    return tuple(
        NcuKernel(names[launch], tuple(sorted(metrics[launch].items())))
        for launch in sorted(names, key=lambda k: int(k) if k.isdigit() else 0)
    )
