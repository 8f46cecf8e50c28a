"""Usage: python scripts/tune_gemm.py [PROBLEM ...]   (default: 01_gemm_bias_relu)

GEMM tile sweep on a GPU: which builtin genomes, and which load style, run a level2
GEMM fastest. Prints figures only; it changes nothing. Run from the repo root on the GPU
machine.

1. cuBLAS (torch.mm, fp32 and tf32) on the problem's GEMM: the ceiling to compare with.
2. A plain Triton GEMM with TMA tensor descriptors (no epilogue), plain and persistent.
3. The builtin agent's kernels for each problem over a grid of tile genomes (screen()).
"""

from __future__ import annotations

import dataclasses
import itertools
import sys

import torch
import triton
import triton.language as tl
from triton.testing import do_bench

from kforge_search.agents.builtin import genome as gen
from kforge_search.agents.builtin.agent import BuiltinAgent, seed_genome
from kforge_search.agents.builtin.screen import screen
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem


@triton.jit
def _mm_tma(
    a_desc,
    b_desc,
    c_ptr,
    M,
    N,
    K,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    GROUP_M: tl.constexpr,
    PREC: tl.constexpr,
    NUM_SMS: tl.constexpr,
):
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    tiles = num_m * num_n
    for tile in tl.range(tl.program_id(0), tiles, NUM_SMS):
        group = tile // (GROUP_M * num_n)
        first = group * GROUP_M
        size = min(num_m - first, GROUP_M)
        pid_m = first + (tile % (GROUP_M * num_n)) % size
        pid_n = (tile % (GROUP_M * num_n)) // size
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            a = a_desc.load([pid_m * BM, k])
            b = b_desc.load([pid_n * BN, k])
            acc = tl.dot(a, b.T, acc, input_precision=PREC)
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        tl.store(
            c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm < M)[:, None] & (rn < N)[None, :]
        )


def tma_mm(a, w, bm, bn, bk, stages, warps, prec, persistent):
    from triton.tools.tensor_descriptor import TensorDescriptor

    m, k = a.shape
    n = w.shape[0]
    c = torch.empty(m, n, device=a.device)
    ad = TensorDescriptor.from_tensor(a, [bm, bk])
    bd = TensorDescriptor.from_tensor(w, [bn, bk])
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    grid = min(sms, tiles) if persistent else tiles
    return lambda: _mm_tma[(grid,)](
        ad,
        bd,
        c,
        m,
        n,
        k,
        BM=bm,
        BN=bn,
        BK=bk,
        GROUP_M=8,
        PREC=prec,
        NUM_SMS=grid,
        num_warps=warps,
        num_stages=stages,
    )


def tflops(m, n, k, ms):
    return 2 * m * n * k / ms / 1e9


def main(ids: list[str]) -> None:
    print(torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
    m, n, k = 1024, 8192, 8192
    a = torch.randn(m, k, device="cuda")
    w = torch.randn(n, k, device="cuda") / 90
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        ms = do_bench(lambda: torch.mm(a, w.t()))
        print(f"cublas {'tf32' if tf32 else 'fp32'}: {ms:.3f} ms {tflops(m, n, k, ms):.0f} TFLOP/s")
    torch.backends.cuda.matmul.allow_tf32 = False
    for prec, persistent in itertools.product(("tf32", "tf32x3"), (False, True)):
        for bm, bn, bk, stages, warps in [
            (128, 256, 32, 3, 8),
            (128, 256, 32, 4, 8),
            (128, 128, 32, 4, 4),
            (128, 128, 32, 5, 8),
            (128, 128, 64, 3, 8),
            (256, 128, 32, 3, 8),
            (128, 64, 64, 4, 4),
            (64, 256, 32, 4, 4),
        ]:
            try:
                fn = tma_mm(a, w, bm, bn, bk, stages, warps, prec, persistent)
                ms = do_bench(fn)
                fig = f"{ms:.3f} ms {tflops(m, n, k, ms):.0f} TFLOP/s"
            except Exception as exc:  # a config that does not fit is a figure too
                fig = f"failed: {type(exc).__name__}: {str(exc)[:120]}"
            print(f"tma {prec} persistent={persistent} {bm}x{bn}x{bk} s{stages} w{warps}: {fig}")
    agent, platform = BuiltinAgent(), get_platform("cuda-triton")
    for pid in ids:
        problem = resolve_problem(f"level2/{pid}")
        plan = agent.plan(problem)
        for policy in ("strict", "loose"):
            seed = seed_genome(plan, platform, policy)
            grid = [seed]
            for bm, bn, bk, stages, warps, group in itertools.product(
                (64, 128, 256), (128, 256), (32, 64), (3, 4), (4, 8), (8,)
            ):
                g = gen.repair(
                    dataclasses.replace(
                        seed,
                        block_m=bm,
                        block_n=bn,
                        block_k=bk,
                        num_stages=stages,
                        num_warps=warps,
                        group_m=group,
                    ),
                    policy,
                )
                if g not in grid and bm * bn <= 256 * 128:
                    grid.append(g)
            ranked = screen(agent, problem, platform, grid, runs=10, warmup=2)
            print(f"== {pid} {policy}: {len(grid)} genomes, seed {gen.describe(seed)}")
            for item in ranked[:12]:
                print(
                    f"  {item.p50_ms or float('nan'):.3f} ms  {gen.describe(item.genome)}"
                    + ("  (seed)" if item.genome == seed else "")
                )
            seed_ms = next(i.p50_ms for i in ranked if i.genome == seed)
            print(f"  seed {seed_ms} ms; failures {sum(i.p50_ms is None for i in ranked)}")
            sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:] or ["01_gemm_bias_relu"])
