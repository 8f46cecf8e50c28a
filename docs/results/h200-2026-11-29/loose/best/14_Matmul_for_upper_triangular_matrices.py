"""14_Matmul_for_upper_triangular_matrices on cuda-triton: written by kforge's builtin synthesizer (templates, no LLM).

Ops: gemm,triu.
Stage 0: blocked GEMM, elementwise epilogue fused.
Genome: block_m=128 block_n=256 block_k=64 precision=bf16 loads=tma pass_block=2048 pass_warps=8.
Why this draft: the seed's tiles with bf16 operands (K steps of 64) and fp32 accumulation: what the tolerance admits beyond tf32"""

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor



def _kf_rows_aligned(t):
    """Whether t's rows start 16-byte aligned, as the TMA unit reads them."""
    return t.data_ptr() % 16 == 0 and (t.stride(0) * t.element_size()) % 16 == 0


def _kf_aligned(t):
    """t, or a copy whose rows start 16 bytes apart and aligned, as the TMA unit reads them
    (the descriptor keeps t's shape: the padding is never read). H200, 8_Matmul_with_irregular
    (K = 2949): the masked pointer loads the rows' alignment forced ran 18 ms, fp32 eager 6.4."""
    if _kf_rows_aligned(t):
        return t
    step = 16 // t.element_size()
    padded = torch.empty((t.shape[0], -(-t.shape[1] // step) * step), device=t.device, dtype=t.dtype)
    padded[:, : t.shape[1]].copy_(t)
    return padded[:, : t.shape[1]]


def _kf_descs(a, b, bm, bn, bk, b_kn, copy=True):
    """TMA descriptors of A's (bm x bk) and B's tiles (over an aligned copy where rows are
    not 16-byte aligned: _kf_aligned; `copy` False: none then), or (None, None) where the TMA
    unit cannot read them: tiles over 256, a strided last dimension, not 2-D. (A weight's hi
    and lo halves side by side read lo at an offset of N: its copy would not align that.)"""
    blocks = ((bm, bk), (bk, bn) if b_kn else (bn, bk))
    for t, block in zip((a, b), blocks):
        size = t.element_size()
        if t.dim() != 2 or t.stride(-1) != 1 or max(block) > 256 or block[-1] * size < 16:
            return None, None
        if not copy and not _kf_rows_aligned(t):
            return None, None
    a, b = _kf_aligned(a), _kf_aligned(b)
    return tuple(
        TensorDescriptor(t, list(t.shape), list(t.stride()), list(block))
        for t, block in zip((a, b), blocks)
    )


@triton.jit
def _kf_bf16rn(x):
    """x's float32 values rounded to the nearest bfloat16 (ties to even), as float32: what
    a GPU's conversion gives; Triton's interpreter truncates, so there this rounds first."""
    bits = x.to(tl.uint32, bitcast=True)
    bits = bits + 0x7FFF + ((bits >> 16) & 1)
    return (bits & 0xFFFF0000).to(tl.float32, bitcast=True)


@triton.jit
def _kf_s0_gemm(
    a_ptr, b_ptr, a_desc, b_desc, c0, b1, ld_b1,
    M, N, K, NC, R, SEG, G, POOL_K, WS_PLANE,
    s_ab, s_am, s_ak, s_bb, s_bk, s_bn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr, EVEN_K: tl.constexpr, TMA: tl.constexpr, BF16_IN_FP32: tl.constexpr,
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
    rows64 = rows.to(tl.int64)
    k_lo = 0
    k_hi = K
    cols = offs_j
    mask_c = mask_j
    if TMA:  # whole tiles through the TMA unit (zero-filled past the edges)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(k_lo, k_hi, BLOCK_K):
            a = a_desc.load([pid_m * BLOCK_M, k0])
            b = b_desc.load([k0, pid_n * BLOCK_N])
            if BF16_IN_FP32:  # the interpreter: bf16-rounded values (to nearest), multiplied in fp32
                a = _kf_bf16rn(a.to(tl.float32))
                b = _kf_bf16rn(b.to(tl.float32))
                acc = tl.dot(a, b, acc, input_precision="ieee")
            else:
                acc = tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16), acc)
    else:
        rk = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + (offs_m % M)[:, None].to(tl.int64) * s_am + (k_lo + rk)[None, :] * s_ak
        b_ptrs = b_ptr + (k_lo + rk)[:, None] * s_bk + (cols % N)[None, :].to(tl.int64) * s_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(k_lo, k_hi, BLOCK_K):
            if EVEN_K:  # every K step is whole: loads without masks pipeline best
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
            else:
                k_ok = (k0 + rk) < k_hi
                a = tl.load(a_ptrs, mask=k_ok[None, :], other=0.0)
                b = tl.load(b_ptrs, mask=k_ok[:, None], other=0.0)
            if BF16_IN_FP32:  # the interpreter: bf16-rounded values (to nearest), multiplied in fp32
                a = _kf_bf16rn(a.to(tl.float32))
                b = _kf_bf16rn(b.to(tl.float32))
                acc = tl.dot(a, b, acc, input_precision="ieee")
            else:
                acc = tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16), acc)
            a_ptrs += BLOCK_K * s_ak
            b_ptrs += BLOCK_K * s_bk
    cols = offs_j
    mask_c = mask_j
    v0 = acc
    v1 = tl.where((cols[None, :] - rows[:, None] % tl.cast(c0, tl.int32)) >= 0.0, v0, 0.0)
    tl.store(b1 + rows64[:, None] * ld_b1 + cols[None, :], v1, mask=mask_r[:, None] & mask_c[None, :])


# Triton's interpreter (cpu-triton) cannot multiply bf16 tiles; there the bf16-rounded values
# are multiplied in fp32, the same products a GPU's bf16 dot accumulates in fp32.
_KF_BF16_IN_FP32 = type(_kf_s0_gemm).__name__ == "InterpretedFunction"


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A, B):
        a0 = A
        lead = A.shape[:-1]
        R = a0.shape[0]
        a0 = a0.to(torch.bfloat16) if a0.is_cuda else a0
        G = 1
        c0 = float(lead[-1])
        # stage 0: GEMM + epilogue
        w0 = B.to(torch.bfloat16) if B.is_cuda else B
        M0, K0 = a0.shape[-2], a0.shape[-1]
        BT0 = 1
        N0 = w0.shape[-1]
        POOL0 = 1
        NC0 = N0
        SEG0 = NC0
        BR = R
        sa0 = (0, a0.stride(-2), a0.stride(-1))
        sb0 = (0, w0.stride(-2), w0.stride(-1))
        b1 = torch.empty((R, NC0), device=a0.device, dtype=torch.float32)
        da0, db0 = _kf_descs(a0, w0, 128, 256, 64, True)
        _kf_s0_gemm[(triton.cdiv(M0, 128) * triton.cdiv(NC0, 256), 1, BT0)](a0, w0, da0, db0, c0, b1, b1.shape[-1], M0, N0, K0, NC0, R, SEG0, G, POOL0, 0, *sa0, *sb0, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, SPLIT_K=1, num_warps=8, num_stages=3, EVEN_K=K0 % 64 == 0, BF16_IN_FP32=_KF_BF16_IN_FP32, TMA=da0 is not None)
        return b1
