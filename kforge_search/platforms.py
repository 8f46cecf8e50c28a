"""The platform registry: what a candidate targets, how it is built and timed, where it runs."""

from __future__ import annotations

import importlib.util
import shutil
from dataclasses import dataclass


@dataclass(frozen=True)
class Platform:
    name: str
    device_kind: str  # torch device type: "cuda", "cpu", "xpu", "mps"
    language: str  # "triton", "cuda-cpp", "cpp", "metal", "cute"
    build: str  # how a candidate becomes runnable code
    timing: str  # timing method: "cuda_events" or "perf_counter"
    timing_meaningful: bool
    ray_resources: tuple[tuple[str, float], ...]  # what an evaluator actor asks Ray for
    node_label: str  # the Ray node label of the device kind ("" for any node)
    runnable: bool  # implemented by this tool
    env: tuple[tuple[str, str], ...] = ()  # environment of the candidate's process
    description: str = ""


@dataclass(frozen=True)
class Availability:
    ok: bool
    reason: str


PLATFORMS: dict[str, Platform] = {
    p.name: p
    for p in (
        Platform(
            "cuda-triton",
            "cuda",
            "triton",
            "import module; Triton JIT-compiles on first launch",
            "cuda_events",
            True,
            (("GPU", 1.0),),
            "gpu",
            True,
            description="Triton kernels on an NVIDIA GPU",
        ),
        Platform(
            "cuda-cpp",
            "cuda",
            "cuda-cpp",
            "torch.utils.cpp_extension.load_inline (nvcc)",
            "cuda_events",
            True,
            (("GPU", 1.0),),
            "gpu",
            True,
            description="CUDA C++ kernels via load_inline",
        ),
        Platform(
            "cpu-cpp",
            "cpu",
            "cpp",
            "torch.utils.cpp_extension.load_inline (g++ -fopenmp)",
            "perf_counter",
            True,
            (("CPU", 1.0),),
            "",
            True,
            description="C++ with OpenMP via load_inline",
        ),
        Platform(
            "cpu-triton",
            "cpu",
            "triton",
            "import module; Triton's interpreter runs kernels",
            "perf_counter",
            False,
            (("CPU", 1.0),),
            "",
            True,
            env=(("TRITON_INTERPRET", "1"),),
            description="Triton under its interpreter: correctness only, times not meaningful",
        ),
        Platform(
            "xpu-triton",
            "xpu",
            "triton",
            "import module",
            "xpu_events",
            True,
            (("GPU", 1.0),),
            "xpu",
            False,
            description="Triton on Intel GPUs (declared)",
        ),
        Platform(
            "mps-metal",
            "mps",
            "metal",
            "Metal shaders via torch.mps",
            "mps_events",
            True,
            (("GPU", 1.0),),
            "mps",
            False,
            description="Metal kernels on Apple GPUs (declared)",
        ),
        Platform(
            "cuda-cute",
            "cuda",
            "cute",
            "CuTe DSL / CUTLASS",
            "cuda_events",
            True,
            (("GPU", 1.0),),
            "gpu",
            False,
            description="CuTe kernels on NVIDIA GPUs (declared)",
        ),
    )
}


def get_platform(name: str) -> Platform:
    try:
        return PLATFORMS[name]
    except KeyError:
        raise ValueError(
            f"unknown platform {name!r}: use one of {', '.join(PLATFORMS)} "
            "(`kforge platforms` says which run here)"
        ) from None


def _has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def availability(platform: Platform) -> Availability:
    """Whether the platform can run on this machine, and why not (imports torch)."""
    if not platform.runnable:
        return Availability(False, "declared only: kforge-search has no backend for it yet")
    if platform.language == "triton" and not _has_module("triton"):
        return Availability(False, "triton is not installed (pip install triton)")
    if platform.device_kind == "cpu":
        if platform.language == "cpp" and not (shutil.which("c++") or shutil.which("g++")):
            return Availability(False, "no C++ compiler on PATH (install g++)")
        return Availability(True, "CPU")
    import torch

    if not torch.cuda.is_available():
        why = "torch is a CPU-only build" if torch.version.cuda is None else "no CUDA device"
        return Availability(False, f"{why}: needs an NVIDIA GPU")
    if platform.language == "cuda-cpp":
        from torch.utils.cpp_extension import CUDA_HOME

        if CUDA_HOME is None:
            return Availability(False, "nvcc not found: set CUDA_HOME to the CUDA toolkit")
    return Availability(True, torch.cuda.get_device_name(0))
