"""Would a bf16x3 GEMM (each fp32 operand split into bf16 hi + lo, three bf16 tensor-core dots)
pass the strict policy, and how fast is it against tf32x3? Prints figures only. On the GPU
machine, from the repo root:  python scripts/try_bf16x3.py

Shapes and value ranges of level2/01_gemm_bias_relu (x ~ randn, nn.Linear's uniform weights);
the error is measured against an fp64 product and compared with strict's atol = rtol = 1e-4.
Variants: tf32x3 (Triton's own split), bf16x3 with both operands split in the kernel, and
bf16x3 with the weight split once beforehand (as a module would at init).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.testing import do_bench
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def _split(x):
    hi = x.to(tl.bfloat16)
    lo = (x - hi.to(tl.float32)).to(tl.bfloat16)
    return hi, lo


@triton.jit
def _tf32_split(x):
    hi = (x.to(tl.uint32, bitcast=True) & 0xFFFFE000).to(tl.float32, bitcast=True)
    return hi, x - hi


@triton.jit
def _mm(a_desc, b_desc, bh_desc, bl_desc, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
        BK: tl.constexpr, GROUP_M: tl.constexpr, MODE: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    group = pid // (GROUP_M * num_n)
    first = group * GROUP_M
    size = min(num_m - first, GROUP_M)
    pid_m = first + (pid % (GROUP_M * num_n)) % size
    pid_n = (pid % (GROUP_M * num_n)) // size
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = a_desc.load([pid_m * BM, k])
        if MODE == 0:  # tf32x3
            b = b_desc.load([pid_n * BN, k])
            acc = tl.dot(a, b.T, acc, input_precision="tf32x3")
        elif MODE == 1:  # bf16x3, both split here
            b = b_desc.load([pid_n * BN, k])
            ah, al = _split(a)
            bh, bl = _split(b)
            acc = tl.dot(ah, bh.T, acc)
            acc = tl.dot(ah, bl.T, acc)
            acc = tl.dot(al, bh.T, acc)
        elif MODE == 2:  # bf16x3, the weight split beforehand
            bh = bh_desc.load([pid_n * BN, k])
            bl = bl_desc.load([pid_n * BN, k])
            ah, al = _split(a)
            acc = tl.dot(ah, bh.T, acc)
            acc = tl.dot(ah, bl.T, acc)
            acc = tl.dot(al, bh.T, acc)
        else:  # tf32x3 by hand, the weight split beforehand (hi: tf32-truncated, lo: the rest)
            bh = bh_desc.load([pid_n * BN, k])
            bl = bl_desc.load([pid_n * BN, k])
            ah, al = _tf32_split(a)
            acc = tl.dot(al, bh.T, acc, input_precision="tf32")
            acc = tl.dot(ah, bl.T, acc, input_precision="tf32")
            acc = tl.dot(ah, bh.T, acc, input_precision="tf32")
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm < M)[:, None] & (rn < N)[None, :])


def run(a, w, wh, wl, mode, bm, bn, bk, stages, warps):
    m, k = a.shape
    n = w.shape[0]
    c = torch.empty(m, n, device=a.device)
    ad = TensorDescriptor.from_tensor(a, [bm, bk])
    bd = TensorDescriptor.from_tensor(w, [bn, bk])
    bhd = TensorDescriptor.from_tensor(wh, [bn, bk])
    bld = TensorDescriptor.from_tensor(wl, [bn, bk])
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)

    def fn():
        _mm[grid](ad, bd, bhd, bld, c, m, n, k, BM=bm, BN=bn, BK=bk, GROUP_M=8, MODE=mode,
                  num_warps=warps, num_stages=stages)  # fmt: skip
        return c

    return fn


def main() -> None:
    print(torch.cuda.get_device_name(), "triton", triton.__version__)
    m, n, k = 1024, 8192, 8192
    torch.manual_seed(0)
    for scale, shift in ((1.0, 0.0), (4.0, 0.5)):  # the evaluator's two input distributions
        a = torch.randn(m, k, device="cuda") * scale + shift
        w = (torch.rand(n, k, device="cuda") * 2 - 1) / k**0.5
        bh = w.to(torch.bfloat16)
        bl = (w - bh.float()).to(torch.bfloat16)
        th = (w.view(torch.int32) & -8192).view(torch.float32)  # 0xFFFFE000: tf32 bits
        tl_ = w - th
        ref = a.double() @ w.double().T
        flops = 2 * m * n * k
        modes = (("tf32x3", 0, bh, bl), ("bf16x3 split in kernel", 1, bh, bl),
                 ("bf16x3 presplit w", 2, bh, bl), ("tf32x3 presplit w", 3, th, tl_))  # fmt: skip
        for name, mode, wh, wl in modes:
            best = None
            for bm, bn, bk, stages, warps in [
                (128, 256, 32, 3, 8), (128, 256, 64, 3, 8), (128, 128, 64, 3, 8),
                (128, 128, 64, 4, 8), (128, 128, 32, 4, 4), (256, 128, 64, 3, 8),
                (128, 256, 64, 4, 8), (64, 256, 64, 4, 4),
            ]:  # fmt: skip
                try:
                    fn = run(a, w, wh, wl, mode, bm, bn, bk, stages, warps)
                    out = fn().double()
                    ms = do_bench(fn)
                except Exception:  # a tile that does not fit: skipped
                    continue
                err = (out - ref).abs()
                bound = 1e-4 + 1e-4 * ref.abs()
                worst = (err / bound).max().item()  # > 1 fails strict
                if best is None or ms < best[0]:
                    best = (ms, f"{bm}x{bn}x{bk} s{stages} w{warps}", err.max().item(), worst)
            if best:
                ms, cfg, err, worst = best
                rate = flops / ms / 1e9
                print(f"x*{scale}+{shift} {name}: {ms:.3f} ms {rate:.0f} TFLOP/s ({cfg}); "
                      f"max abs err {err:.2e}, worst err/strict bound {worst:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
