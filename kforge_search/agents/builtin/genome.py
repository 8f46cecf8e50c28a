"""The tunable choices of a synthesized kernel, and the operators the search uses on them.

A genome is a frozen dataclass per backend: `TritonGenome` (GPU tiles, warps, pipelining,
split-K, dot precision, where the tail runs) and `CppGenome` (cache blocks, the work below
which OpenMP stays off). `mutate` changes one gene to another admissible value; `crossover`
takes each gene from either parent; both repair what the hardware cannot take.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Any

# GEMM input precisions, most accurate first. bf16x3: each fp32 operand as bf16 hi + lo, three
# bf16 dots (lo*lo dropped, ~2^-16 per product) with the partial sum promoted like presplit's.
# tf32rn: one tf32 dot of operands rounded to the nearest tf32 first (ties away from zero, as
# cuBLAS rounds them); a plain tf32 dot reads the operands' top 19 bits as they are, and that
# truncation's bias grows with K: on level 1's all-positive inputs (torch.rand) PyTorch's TF32
# passed strict and our tf32 did not (H200, 5 of 5 GEMMs tried).
PRECISIONS = ("ieee", "tf32x3", "bf16x3", "tf32rn", "tf32", "bf16")
# GEMM input precisions each numeric policy admits (fp32 accumulation always).
POLICY_PRECISIONS = {
    "strict": ("ieee", "tf32x3", "bf16x3"),
    "loose": ("ieee", "tf32x3", "bf16x3", "tf32", "bf16"),
}
PLACEMENTS = ("fused", "second_pass")
LOADS = ("pointer", "tma")
# How a tf32x3 dot is made: Triton's own split of both operands in every k step, or the
# weight split into tf32 hi + lo once at init and three tf32 dots whose partial sum over
# `promote` k blocks leaves the tensor cores for an fp32 add (their accumulator rounds
# toward zero: held there for the whole K loop it loses strict's bound; docs/synthesizer.md)
X3_SPLITS = ("triton", "presplit")
# Where a bf16 dot's fp32 inputs become bf16: "call", by torch once per call before the
# kernel (bf16 tiles in shared memory: H200, level2 at 1024 x 8192 x 8192, as fast as tf32
# where A's fp32 tiles cast in registers were not); "tile", each fp32 tile in registers, the
# inputs read once (a GEMM of few tiles over a long K reads its operands once and writes
# little: 6_Matmul_with_large_K's 1 GiB of fp32 inputs, which a cast per call reads, writes
# half again and the kernel reads once more). A weight is cast once either way.
CASTS = ("call", "tile")
SMEM_BYTES = 200 * 1024  # what the pipelined operand tiles may take (H100: 227 KiB per SM)


def _pow2(value: int, low: int, high: int, name: str) -> None:
    if value < low or value > high or value & (value - 1):
        raise ValueError(f"{name}={value}: needs a power of two in [{low}, {high}]")


@dataclass(frozen=True)
class TritonGenome:
    block_m: int = 128
    block_n: int = 128
    block_k: int = 32
    group_m: int = 8  # row-tiles walked together (L2 reuse)
    num_warps: int = 8
    num_stages: int = 3
    split_k: int = 1  # K cut into this many slices, summed by the epilogue kernel
    precision: str = "tf32x3"
    placement: str = "fused"  # tail inside the GEMM when a tile spans the row, per call
    weight_layout: str = "nk"  # "kn": a transposed copy of the weight, made once and cached
    loads: str = "pointer"  # "tma": operand tiles through TMA descriptors where the tensors allow
    fuse_limit: int = 256  # the longest row (or column) a fused tile may span
    pass_block: int = 1024  # elements per step of the second pass
    pass_warps: int = 4
    # a row pass with fewer (row, segment) programs than this walks each in parts, one
    # kernel per statistic (triton_kernels.split_pass_kernels); 0: never
    pass_programs: int = 512
    x3: str = "triton"  # tf32x3 only: X3_SPLITS
    promote: int = 4  # x3=presplit and bf16x3: k blocks per tensor-core partial sum
    cast: str = "call"  # bf16 only: CASTS

    def __post_init__(self) -> None:
        _pow2(self.block_m, 1, 256, "block_m")  # under 16 (and over 256 columns): flat()
        _pow2(self.block_n, 16, 4096, "block_n")
        _pow2(self.block_k, 16, 128, "block_k")
        _pow2(self.num_warps, 1, 16, "num_warps")
        _pow2(self.split_k, 1, 16, "split_k")
        _pow2(self.fuse_limit, 16, 1024, "fuse_limit")
        _pow2(self.pass_block, 64, 8192, "pass_block")
        _pow2(self.pass_warps, 1, 16, "pass_warps")
        _pow2(self.promote, 1, 64, "promote")
        if self.pass_programs:
            _pow2(self.pass_programs, 16, 4096, "pass_programs")
        if not 1 <= self.group_m <= 64 or not 1 <= self.num_stages <= 8:
            raise ValueError(f"group_m={self.group_m}, num_stages={self.num_stages}: 1-64, 1-8")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision={self.precision!r}: use one of {PRECISIONS}")
        if self.placement not in PLACEMENTS:
            raise ValueError(f"placement={self.placement!r}: use one of {PLACEMENTS}")
        if self.weight_layout not in ("nk", "kn"):
            raise ValueError(f"weight_layout={self.weight_layout!r}: use nk or kn")
        if self.loads not in LOADS:
            raise ValueError(f"loads={self.loads!r}: use one of {LOADS}")
        if self.x3 not in X3_SPLITS:
            raise ValueError(f"x3={self.x3!r}: use one of {X3_SPLITS}")
        if self.cast not in CASTS:
            raise ValueError(f"cast={self.cast!r}: use one of {CASTS}")

    @property
    def smem_bytes(self) -> int:
        if self.precision == "bf16" and self.cast == "call":  # both operands come in bf16
            # (render_triton: the weight cast once, A and an input B per call)
            per_k = (self.block_m + self.block_n) * 2
        elif self.precision == "bf16x3":  # fp32 A, B as bf16 hi + lo (or fp32, split here)
            per_k = self.block_m * 4 + self.block_n * 4
        elif self.precision == "tf32x3" and self.x3 == "presplit":  # fp32 B hi + lo
            per_k = (self.block_m + 2 * self.block_n) * 4
        else:
            per_k = (self.block_m + self.block_n) * 4
        return per_k * self.block_k * self.num_stages


@dataclass(frozen=True)
class CppGenome:
    block_m: int = 64  # rows of x per tile
    block_n: int = 64  # output columns per tile (a multiple of 16)
    block_k: int = 256  # K block kept in cache
    parallel_work: int = 1 << 21  # M*N*K below which the kernel stays on one thread
    weight_layout: str = "kn"  # "kn": a transposed copy of the weight, made once and cached

    def __post_init__(self) -> None:
        if not 8 <= self.block_m <= 512:
            raise ValueError(f"block_m={self.block_m}: needs 8..512")
        if self.block_n % 16 or not 16 <= self.block_n <= 512:
            raise ValueError(f"block_n={self.block_n}: needs a multiple of 16 in 16..512")
        if not 16 <= self.block_k <= 4096:
            raise ValueError(f"block_k={self.block_k}: needs 16..4096")
        if self.parallel_work < 1:
            raise ValueError(f"parallel_work={self.parallel_work}: needs >= 1")
        if self.weight_layout not in ("nk", "kn"):
            raise ValueError(f"weight_layout={self.weight_layout!r}: use nk or kn")


Genome = TritonGenome | CppGenome

TRITON_SPACE: dict[str, tuple[Any, ...]] = {
    "block_m": (32, 64, 128, 256),
    "block_n": (32, 64, 128, 256),
    "block_k": (16, 32, 64, 128),
    "group_m": (1, 4, 8, 16),
    "num_warps": (4, 8),
    "num_stages": (2, 3, 4, 5),
    "split_k": (1, 2, 4, 8),
    "placement": PLACEMENTS,
    "weight_layout": ("nk", "kn"),
    "loads": LOADS,
    "fuse_limit": (64, 128, 256, 512),
    "pass_block": (256, 512, 1024, 2048, 4096),
    "pass_warps": (2, 4, 8, 16),
    "pass_programs": (0, 256, 512, 1024, 2048, 4096),
    "x3": X3_SPLITS,
    "promote": (1, 2, 4, 8),
    "cast": CASTS,
}
# The tiles of an elementwise program (no GEMM, no statistics, no pooling): a few rows of
# long row pieces, as a flat walk over memory (H200, 19_ReLU at 6 GiB: 1 x 1024 with 4 warps
# 3.04 ms, 16 x 256 3.11, torch.compile 3.035; 2 x 1024 3.055, 1 x 4096 with 8 warps 3.16).
# A genome with such a tile (`flat`) varies among these, so its mutants stay flat.
FLAT_SPACE: dict[str, tuple[Any, ...]] = {
    "block_m": (1, 2, 4, 8),
    "block_n": (512, 1024, 2048, 4096),
}
CPP_SPACE: dict[str, tuple[Any, ...]] = {
    "block_m": (16, 32, 48, 64, 96, 128),
    "block_n": (32, 48, 64, 96, 128, 192, 256),
    "block_k": (64, 128, 256, 384, 512),
    "parallel_work": (1 << 17, 1 << 19, 1 << 21, 1 << 23),
    "weight_layout": ("nk", "kn"),
}


# A policy name with this suffix ("strict+tf32"): the policy's precisions and tf32 rounded as
# PyTorch's is (tf32rn), where the evaluator found PyTorch's own TF32 within the policy on
# this problem's trials (agent.search_policy): the kernel is still verified under the policy.
WITH_TF32 = "+tf32"


def admissible_precisions(policy: str) -> tuple[str, ...]:
    base, tf32 = policy.removesuffix(WITH_TF32), policy.endswith(WITH_TF32)
    try:
        found = POLICY_PRECISIONS[base]
        return (*found, "tf32rn") if tf32 and not {"tf32", "tf32rn"} & set(found) else found
    except KeyError:
        raise ValueError(f"unknown policy {policy!r}: use strict or loose") from None


def flat(genome: Genome) -> bool:
    """Whether the genome's tile is an elementwise program's (FLAT_SPACE): fewer than 16
    rows or more than 256 columns, which no GEMM tile has."""
    return isinstance(genome, TritonGenome) and (genome.block_m < 16 or genome.block_n > 256)


def space(genome: Genome, policy: str) -> dict[str, tuple[Any, ...]]:
    if isinstance(genome, CppGenome):
        return CPP_SPACE
    tiles = FLAT_SPACE if flat(genome) else {}
    return {**TRITON_SPACE, **tiles, "precision": admissible_precisions(policy)}


def repair(genome: Genome, policy: str) -> Genome:
    """The nearest genome the policy and the hardware admit."""
    if isinstance(genome, CppGenome):
        return genome
    allowed = admissible_precisions(policy)
    if genome.precision not in allowed:  # tf32x3: the tensor-core scheme strict always takes
        genome = dataclasses.replace(
            genome, precision="tf32x3" if "tf32x3" in allowed else allowed[0]
        )
    if genome.precision == "ieee" and genome.loads == "tma":  # H100, 09_gemm_sum: TMA tiles
        genome = dataclasses.replace(genome, loads="pointer")  # into an FMA dot ran 33x slower
    if genome.precision != "bf16" and genome.cast != "call":  # bf16's gene alone: another
        # precision with cast=tile writes the same kernels as with call, and the search would
        # take them for a genome not tried yet (a mutant or cross of the bf16 tile step)
        genome = dataclasses.replace(genome, cast="call")
    while genome.smem_bytes > SMEM_BYTES and genome.num_stages > 2:
        genome = dataclasses.replace(genome, num_stages=genome.num_stages - 1)
    while genome.smem_bytes > SMEM_BYTES and genome.block_k > 16:
        genome = dataclasses.replace(genome, block_k=genome.block_k // 2)
    if genome.block_m * genome.block_n >= 256 * 128 and genome.num_warps < 8:
        genome = dataclasses.replace(genome, num_warps=8)
    return genome


def mutate(
    genome: Genome,
    policy: str,
    rng: random.Random,
    genes: int = 1,
    among: frozenset[str] | None = None,
) -> Genome:
    """`genes` genes (of `among`, when given) changed to other admissible values, repaired."""
    options = space(genome, policy)
    if among is not None:
        options = {k: v for k, v in options.items() if k in among}
    changes: dict[str, Any] = {}
    for name in rng.sample(sorted(options), k=min(genes, len(options))):
        others = [v for v in options[name] if v != getattr(genome, name)]
        if others:
            changes[name] = rng.choice(others)
    return repair(dataclasses.replace(genome, **changes), policy)


def more_accurate(genome: Genome, policy: str) -> Genome | None:
    """The same genome with the next more accurate GEMM precision the policy admits."""
    if isinstance(genome, CppGenome):
        return None
    order = [p for p in reversed(PRECISIONS) if p in admissible_precisions(policy)]
    at = order.index(genome.precision) if genome.precision in order else len(order) - 1
    if at + 1 >= len(order):
        return None
    return repair(dataclasses.replace(genome, precision=order[at + 1]), policy)


def crossover(a: Genome, b: Genome, policy: str, rng: random.Random) -> Genome:
    """Each gene from `a` or `b` with equal chance (both of the same backend)."""
    if type(a) is not type(b):
        raise ValueError(f"crossover of a {type(a).__name__} and a {type(b).__name__}")
    picks = {f.name: getattr(rng.choice((a, b)), f.name) for f in dataclasses.fields(a)}
    return repair(type(a)(**picks), policy)


def describe(genome: Genome) -> str:
    """A short text of the genes, for notes and tables."""
    defaults = type(genome)()
    changed = [
        f"{f.name}={getattr(genome, f.name)}"
        for f in dataclasses.fields(genome)
        if f.name in ("block_m", "block_n", "block_k", "precision")
        or getattr(genome, f.name) != getattr(defaults, f.name)
    ]
    return " ".join(changed)


def from_description(text: str, cpp: bool) -> Genome | None:
    """The genome `describe` wrote (genes it left out are the defaults); None when the text
    is not such a description, or names a gene or value the genome does not take."""
    cls: type[TritonGenome] | type[CppGenome] = CppGenome if cpp else TritonGenome
    kinds = {f.name: type(getattr(cls(), f.name)) for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for item in text.split():
        name, eq, value = item.partition("=")
        if not eq or name not in kinds:
            return None
        try:
            values[name] = kinds[name](value)
        except ValueError:
            return None
    try:
        return cls(**values) if values else None
    except ValueError:
        return None
