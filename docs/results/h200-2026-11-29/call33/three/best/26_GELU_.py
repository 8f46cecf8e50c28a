"""26_GELU_ on cuda-triton: written by kforge's builtin synthesizer (templates, no LLM).

Ops: tile,gelu.
Stage 0: blocked GEMM, elementwise epilogue fused.
Genome: block_m=1 block_n=1024 block_k=16 group_m=1 num_warps=4 num_stages=2 precision=tf32.
Why this draft: the seed genome for this platform and policy"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


_KF_NARROW = 2**31  # a kernel's row offsets in int32 where all stay below this (WIDE=False)


@triton.jit
def _kf_s0_gemm(
    a_ptr, b_ptr, t0, ld_t0, BR, b1, ld_b1,
    M, N, K, NC, R, SEG, G, POOL_K, WS_PLANE,
    s_ab, s_am, s_ak, s_bb, s_bk, s_bn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr, EVEN_K: tl.constexpr, WIDE: tl.constexpr,
):
    # Grouped order: GROUP_M row-tiles walk down one column of tiles (L2 reuse).
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(NC, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_j = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_r = offs_m < M
    mask_j = offs_j < NC
    rows = offs_m
    rows64 = rows.to(tl.int64) if WIDE else rows  # int32 offsets where every one fits
    k_lo = 0
    k_hi = K
    cols = offs_j
    mask_c = mask_j
    # anchored by nothing: the tile is loaded by the epilogue
    cols = offs_j
    mask_c = mask_j
    v0 = tl.load(t0 + rows64[:, None] * ld_t0 + cols[None, :], mask=mask_r[:, None] & mask_c[None, :], other=0.0).to(tl.float32)
    v1 = (0.5 * v0 * (1.0 + tl.math.erf(v0 * 0.7071067811865476)))
    tl.store(b1 + rows64[:, None] * ld_b1 + cols[None, :], v1, mask=mask_r[:, None] & mask_c[None, :])



class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor):
        a0 = x.reshape(-1, x.shape[1:].numel())
        lead = x.shape[:1]
        R = a0.shape[0]
        G = 1
        t0 = x.reshape(R, -1).contiguous()
        # stage 0: GEMM + epilogue
        w0 = a0
        M0, K0 = a0.shape[-2], 1
        BT0 = 1
        N0 = a0.shape[-1]
        POOL0 = 1
        NC0 = N0
        SEG0 = NC0
        BR = R
        sa0 = (0, a0.stride(-2), a0.stride(-1))
        sb0 = (0, w0.stride(-2), w0.stride(-1))
        b1 = torch.empty((R, NC0), device=a0.device, dtype=torch.float32)
        fbn0 = min(1024, max(16, triton.next_power_of_2(NC0)))
        fbm0 = 1024 // fbn0
        _kf_s0_gemm[(triton.cdiv(M0, fbm0) * triton.cdiv(NC0, fbn0), 1, BT0)](a0, w0, t0, t0.shape[-1], BR, b1, b1.shape[-1], M0, N0, K0, NC0, R, SEG0, G, POOL0, 0, *sa0, *sb0, BLOCK_M=fbm0, BLOCK_N=fbn0, BLOCK_K=16, GROUP_M=1, SPLIT_K=1, num_warps=4, num_stages=2, EVEN_K=K0 % 16 == 0, WIDE=(R + 256) * max(t0.shape[-1], b1.shape[-1]) >= _KF_NARROW)
        return b1
