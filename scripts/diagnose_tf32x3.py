"""Why did the hand-split tf32x3 GEMM of scripts/try_bf16x3.py miss strict's bound on the
H100 (worst 3.18) when the same scheme, emulated exactly (scripts/emulate_tf32x3.py),
passes with room (0.04)? On the GPU machine, from the repo root:

    python scripts/diagnose_tf32x3.py

1. How the tensor cores take fp32 operands under input_precision="tf32": one dot of
   operands with low mantissa bits set, against the fp64 product of the truncated and of the
   rounded operands: the closer one says which.
2. Each term of the hand scheme (lo*hi, hi*lo, hi*hi) as a dot of its own, against the fp64
   product of the same operands: a term that is not exact to fp32 accumulation is the leak.
3. The whole scheme in one kernel with operands from global memory (no TMA), and Triton's
   own tf32x3, on the evaluator's second input distribution (x*4+0.5).
Prints figures only.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _tile(BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """This program's rows, columns and the k offsets of one block."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    return rm, rn, tl.arange(0, BK)


@triton.jit
def _dot(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
         PREC: tl.constexpr):  # fmt: skip
    rm, rn, rk = _tile(BM, BN, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + rn[:, None] * K + (k + rk)[None, :])
        acc = tl.dot(a, b.T, acc, input_precision=PREC)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def _hand(a_ptr, bh_ptr, bl_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
          BK: tl.constexpr):  # fmt: skip
    rm, rn, rk = _tile(BM, BN, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        bh = tl.load(bh_ptr + rn[:, None] * K + (k + rk)[None, :])
        bl = tl.load(bl_ptr + rn[:, None] * K + (k + rk)[None, :])
        ah = (a.to(tl.uint32, bitcast=True) & 0xFFFFE000).to(tl.float32, bitcast=True)
        al = a - ah
        acc = tl.dot(al, bh.T, acc, input_precision="tf32")
        acc = tl.dot(ah, bl.T, acc, input_precision="tf32")
        acc = tl.dot(ah, bh.T, acc, input_precision="tf32")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


def trunc(x: torch.Tensor) -> torch.Tensor:
    return (x.view(torch.int32) & -8192).view(torch.float32)


def rna(x: torch.Tensor) -> torch.Tensor:
    return ((x.view(torch.int32) + 0x1000) & -8192).view(torch.float32)


def dot(a: torch.Tensor, b: torch.Tensor, prec: str) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[0]
    c = torch.empty(m, n, device="cuda")
    _dot[(m // 64, n // 64)](a, b, c, m, n, k, BM=64, BN=64, BK=32, PREC=prec)
    return c


def worst(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref).abs() / (1e-4 + 1e-4 * ref.abs())).max().item()


def main() -> None:
    print(torch.cuda.get_device_name(), "triton", triton.__version__)
    torch.manual_seed(0)
    m, n, k = 256, 256, 8192
    a = torch.randn(m, k, device="cuda") * 4 + 0.5
    w = (torch.rand(n, k, device="cuda") * 2 - 1) / k**0.5
    out = dot(a, w, "tf32").double()
    for name, conv in (("truncation", trunc), ("round-to-nearest", rna)):
        ref = conv(a).double() @ conv(w).double().T
        print(f"1. tf32 operands by {name}: max |dot - fp64 of those| = "
              f"{(out - ref).abs().max().item():.3e}")  # fmt: skip
    ah, wh = trunc(a), trunc(w)
    al, wl = a - ah, w - wh
    for name, x, y in (("lo*hi", al, wh), ("hi*lo", ah, wl), ("hi*hi", ah, wh)):
        ref = x.double() @ y.double().T
        err = (dot(x, y, "tf32").double() - ref).abs().max().item()
        print(f"2. {name}: max abs err vs fp64 of the same operands {err:.3e} "
              f"(|term| max {ref.abs().max().item():.3e})")  # fmt: skip
    ref = a.double() @ w.double().T
    c = torch.empty(m, n, device="cuda")
    _hand[(m // 64, n // 64)](a, wh, wl, c, m, n, k, BM=64, BN=64, BK=32)
    print(f"3. hand tf32x3, global loads: worst err / strict bound {worst(c, ref):.3f}")
    print(f"3. triton tf32x3: {worst(dot(a, w, 'tf32x3'), ref):.3f}; "
          f"plain tf32: {worst(dot(a, w, 'tf32'), ref):.3f}; "
          f"ieee: {worst(dot(a, w, 'ieee'), ref):.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
