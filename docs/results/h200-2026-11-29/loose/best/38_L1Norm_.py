"""38_L1Norm_ on cuda-triton: written by kforge's builtin synthesizer (templates, no LLM).

Ops: tile,abs,row_sum,div,div.
Stage 0: blocked GEMM, elementwise epilogue fused; row statistics and what follows them in the GEMM kernel when one tile spans the row, else a second fused pass over the rows.
Genome: block_m=16 block_n=256 block_k=32 group_m=1 num_warps=4 precision=tf32 pass_block=4096 pass_warps=8 pass_programs=2048.
Why this draft: the seed with steps of 4096 in its row pass (2048 is faster for some rows, 4096 for others)"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


_KF_NARROW = 2**31  # a kernel's row offsets in int32 where all stay below this (WIDE=False)

# A row pass over many short rows walks several in each program (each one alone was a
# program: 37_Frobenius' 3.7 M rows of 512, one program each, ran at 16% of compile)
_KF_RPP = 32  # rows per program ...
_KF_SHORT_ROW = 1024  # ... where each (segment of a) row is at most this long
_KF_MANY_ROWS = 65536  # ... and there are at least this many


@triton.jit
def _kf_s0_fused(
    a_ptr, b_ptr, t0, ld_t0, BR, b4, ld_b4,
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
    v1 = tl.abs(v0)
    v2 = tl.sum(tl.where(mask_c[None, :], v1, 0.0).to(tl.float64), axis=1).to(tl.float32)[:, None]
    v3 = (v2 / NC)
    v4 = (v0 / v3)
    tl.store(b4 + rows64[:, None] * ld_b4 + cols[None, :], v4, mask=mask_r[:, None] & mask_c[None, :])




@triton.jit
def _kf_s0_rows(
    t0, ld_t0, BR, b4, ld_b4, R, NC, SEG, G,
    BLOCK: tl.constexpr, RPP: tl.constexpr, WIDE: tl.constexpr,
):
    seg = tl.program_id(1)
    base = seg * SEG
    for rr in range(0, RPP):
        row = tl.program_id(0) * RPP + rr
        if row < R:
            row64 = row.to(tl.int64) if WIDE else row  # int32 offsets where every one fits
            acc = tl.full((BLOCK,), 0.0, tl.float64)
            for start in range(0, SEG, BLOCK):
                idx = start + tl.arange(0, BLOCK)
                mask_c = idx < SEG
                cols = base + idx
                v0 = tl.load(t0 + row64 * ld_t0 + cols, mask=mask_c, other=0.0).to(tl.float32)
                v1 = tl.abs(v0)
                acc = (acc + tl.where(mask_c, v1, 0.0).to(tl.float64))
            v2 = tl.sum(acc, axis=0).to(tl.float32)
            v3 = (v2 / NC)
            for start in range(0, SEG, BLOCK):
                idx = start + tl.arange(0, BLOCK)
                mask_c = idx < SEG
                cols = base + idx
                v0 = tl.load(t0 + row64 * ld_t0 + cols, mask=mask_c, other=0.0).to(tl.float32)
                v4 = (v0 / v3)
                tl.store(b4 + row64 * ld_b4 + cols, v4, mask=mask_c)



@triton.jit
def _kf_s0_rows_part0(
    t0, ld_t0, BR, b4, ld_b4, pws2, R, NC, SEG, G, CHUNK,
    BLOCK: tl.constexpr, PARTS: tl.constexpr,
):
    row = tl.program_id(0)
    seg = tl.program_id(1)
    part = tl.program_id(2)
    row64 = row.to(tl.int64)
    base = seg * SEG
    lo = part * CHUNK
    hi = tl.minimum(lo + CHUNK, SEG)
    slot = (row64 * G + seg) * PARTS
    acc = tl.full((BLOCK,), 0.0, tl.float64)
    for start in range(lo, hi, BLOCK):
        idx = start + tl.arange(0, BLOCK)
        mask_c = idx < hi
        cols = base + idx
        v0 = tl.load(t0 + row64 * ld_t0 + cols, mask=mask_c, other=0.0).to(tl.float32)
        v1 = tl.abs(v0)
        acc = (acc + tl.where(mask_c, v1, 0.0).to(tl.float64))
    tl.store(pws2 + slot + part, tl.sum(acc, axis=0))



@triton.jit
def _kf_s0_rows_final(
    t0, ld_t0, BR, b4, ld_b4, pws2, R, NC, SEG, G, CHUNK,
    BLOCK: tl.constexpr, PARTS: tl.constexpr,
):
    row = tl.program_id(0)
    seg = tl.program_id(1)
    part = tl.program_id(2)
    row64 = row.to(tl.int64)
    base = seg * SEG
    lo = part * CHUNK
    hi = tl.minimum(lo + CHUNK, SEG)
    slot = (row64 * G + seg) * PARTS
    v2 = tl.sum(tl.load(pws2 + slot + tl.arange(0, PARTS)), axis=0).to(tl.float32)
    v3 = (v2 / NC)
    for start in range(lo, hi, BLOCK):
        idx = start + tl.arange(0, BLOCK)
        mask_c = idx < hi
        cols = base + idx
        v0 = tl.load(t0 + row64 * ld_t0 + cols, mask=mask_c, other=0.0).to(tl.float32)
        v4 = (v0 / v3)
        tl.store(b4 + row64 * ld_b4 + cols, v4, mask=mask_c)



class ModelNew(nn.Module):
    def __init__(self):
        """
            Initializes the L1 normalization layer.
            """
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor):
        a0 = x.reshape(-1, x.shape[1:].numel())
        lead = x.shape[:1]
        R = a0.shape[0]
        G = 1
        t0 = x.reshape(R, -1).contiguous()
        # stage 0: GEMM + epilogue + row statistics
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
        if triton.next_power_of_2(NC0) <= 256:
            b4 = torch.empty((R, NC0), device=a0.device, dtype=torch.float32)
            bn = max(16, triton.next_power_of_2(NC0))
            bm = max(16, min(16, 8192 // bn))
            _kf_s0_fused[(triton.cdiv(M0, bm), 1, BT0)](a0, w0, t0, t0.shape[-1], BR, b4, b4.shape[-1], M0, N0, K0, NC0, R, SEG0, G, POOL0, 0, *sa0, *sb0, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=32, GROUP_M=1, SPLIT_K=1, num_warps=4, num_stages=3, EVEN_K=K0 % 32 == 0, WIDE=(R + 256) * max(t0.shape[-1], b4.shape[-1]) >= _KF_NARROW)
        else:
            b4 = torch.empty((R, NC0), device=a0.device, dtype=torch.float32)
            pass_block = min(4096, max(16, triton.next_power_of_2(SEG0)))
            rpp = _KF_RPP if SEG0 <= _KF_SHORT_ROW and R * 1 >= _KF_MANY_ROWS else 1
            parts__kf_s0_rows = min(1 << (max(1, 2048 // max(1, R * 1)).bit_length() - 1), 1 << (max(1, triton.cdiv(SEG0, 8 * pass_block)).bit_length() - 1), 4096)
            if parts__kf_s0_rows > 1:
                chunk__kf_s0_rows = triton.cdiv(triton.cdiv(SEG0, parts__kf_s0_rows), pass_block) * pass_block
                pws2 = torch.empty(R * 1 * parts__kf_s0_rows, device=a0.device, dtype=torch.float64)
                _kf_s0_rows_part0[(R, 1, parts__kf_s0_rows)](t0, t0.shape[-1], BR, b4, b4.shape[-1], pws2, R, NC0, SEG0, G, chunk__kf_s0_rows, BLOCK=pass_block, num_warps=8, PARTS=parts__kf_s0_rows)
                _kf_s0_rows_final[(R, 1, parts__kf_s0_rows)](t0, t0.shape[-1], BR, b4, b4.shape[-1], pws2, R, NC0, SEG0, G, chunk__kf_s0_rows, BLOCK=pass_block, num_warps=8, PARTS=parts__kf_s0_rows)
            else:
                _kf_s0_rows[(triton.cdiv(R, rpp), 1)](t0, t0.shape[-1], BR, b4, b4.shape[-1], R, NC0, SEG0, G, BLOCK=pass_block, num_warps=8, RPP=rpp, WIDE=(R + 256) * max(t0.shape[-1], b4.shape[-1]) >= _KF_NARROW)
        return b4
