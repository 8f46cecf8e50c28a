"""Peak compute and memory bandwidth per device, for the roofline."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Peaks:
    """Dense peaks: TFLOP/s per precision and memory bandwidth in GB/s."""

    device: str
    fp32_tflops: float
    tf32_tflops: float
    bf16_tflops: float
    mem_gbs: float
    source: str  # "datasheet" or "measured"

    def tflops(self, precision: str) -> float:
        return {
            "ieee": self.fp32_tflops,
            "fp32": self.fp32_tflops,
            "tf32x3": self.tf32_tflops / 3,
            "bf16x3": self.bf16_tflops / 3,
            "tf32": self.tf32_tflops,
            "tf32rn": self.tf32_tflops,
            "bf16": self.bf16_tflops,
        }[precision]


# Vendor datasheet figures (dense, no sparsity).
_DATASHEET = (
    ("H200", Peaks("H200", 67.0, 494.7, 989.4, 4800.0, "datasheet")),
    ("H100 PCIe", Peaks("H100 PCIe", 51.2, 378.0, 756.0, 2000.0, "datasheet")),
    ("H100", Peaks("H100 SXM", 67.0, 494.7, 989.4, 3350.0, "datasheet")),
)


def datasheet_peaks(device_name: str) -> Peaks | None:
    """Peaks for a GPU name as torch reports it (e.g. 'NVIDIA H100 80GB HBM3')."""
    for key, peaks in _DATASHEET:
        if key in device_name:
            return peaks
    return None


def platform_peaks(platform: Any, device_name: str) -> Peaks | None:
    """The peaks of a platform's device: measured once for the CPU (cached under the cache
    folder), the datasheet's for a GPU (None for one it does not list)."""
    from kforge_search.paths import cache_dir

    if platform.device_kind == "cpu":
        return measure_cpu_peaks(cache_dir() / "cpu_peaks.json")
    return datasheet_peaks(device_name)


def measure_cpu_peaks(cache_file: Path | None = None) -> Peaks:
    """A quick measurement of this CPU: fp32 matmul FLOP/s and copy bandwidth (cached)."""
    if cache_file and cache_file.is_file():
        return Peaks(**json.loads(cache_file.read_text()))
    import torch

    a = torch.randn(1024, 1024)
    b = torch.randn(1024, 1024)
    torch.mm(a, b)
    start = time.perf_counter()
    for _ in range(10):
        torch.mm(a, b)
    flops = 10 * 2 * 1024**3 / (time.perf_counter() - start)
    src = torch.empty(64 * 2**20 // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)
    start = time.perf_counter()
    for _ in range(10):
        dst.copy_(src)
    bandwidth = 10 * 2 * src.numel() * 4 / (time.perf_counter() - start)
    peaks = Peaks("cpu", flops / 1e12, flops / 1e12, flops / 1e12, bandwidth / 1e9, "measured")
    if cache_file:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        cache_file.write_text(json.dumps(asdict(peaks)))
    return peaks
