"""Compile a generated Triton candidate's kernels for an NVIDIA GPU without one (Triton's
ahead-of-time path: source -> TTIR -> TTGIR -> PTX -> cubin with the bundled ptxas).

`python -m tests.agents.builtin.aot CANDIDATE.py [--arch 90]` prints one line per kernel and exits 1
if any fails. Run it in a process where Triton is not interpreted. Argument types come from
the generator's naming: *_ptr, t<k>, b<k>, ws_ptr are fp32 pointers, pws<k> fp64 ones
(b_ptr is bf16 when the draft casts its weight), c<k> fp32 scalars, the rest int32;
constexprs get the values the forward would pass for a typical size (PLANE, the runs of a
stage over an input's swapped leading dims: 33_BatchNorm's 512 * 512); TMA descriptors
(a_desc, b_desc) the BLOCK_* tiles.
A weight split into bf16 hi + lo (bf16x3) makes b_ptr and _kf_split's out_ptr bf16 too.
`--dtype float16` (or bfloat16): a program of that dtype, whose leaves t<k>, GEMM operands
(A but where the kernel says it is a float32 value stored) and output buffer (the one the
forward returns) are pointers of that dtype.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

CONSTEXPRS = {
    "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8, "SPLIT_K": 1, "BLOCK": 1024,
    "BLOCK_R": 64, "BLOCK_C": 32, "BF16_IN_FP32": False, "EVEN_K": True, "TMA": True,
    "POOL_W": 8, "PROMOTE": 4, "DIM": 0, "BF16": False, "LOWP_IN_FP32": False, "PARTS": 4,
    "RPP": 32, "WIDE": False, "PLANE": 262144, "ONE": False,
}  # fmt: skip
LOW = {"float16": "fp16", "bfloat16": "bf16"}


def desc_type(
    name: str, bf16_weight: bool, b_kn: bool, consts: dict[str, Any], low: dict[str, str]
) -> str:
    m, n, k = consts["BLOCK_M"], consts["BLOCK_N"], consts["BLOCK_K"]
    if name == "a_desc":
        return f"tensordesc<{low.get('a_ptr', 'fp32')}[{m}, {k}]>"
    block = f"[{k}, {n}]" if b_kn else f"[{n}, {k}]"
    return f"tensordesc<{low.get('b_ptr', 'bf16' if bf16_weight else 'fp32')}{block}>"


def arg_type(name: str, bf16_weight: bool, low: dict[str, str] | None = None) -> str:
    if low and name in low:
        return f"*{low[name]}"
    if name in ("b_ptr", "out_ptr") and bf16_weight:  # out_ptr: _kf_split's bf16 pair
        return "*bf16"
    if re.fullmatch(r"pws\d+", name):  # a split row pass's workspace (split_pass_kernels)
        return "*fp64"
    if name.endswith("_ptr") or re.fullmatch(r"[tb]\d+", name):
        return "*fp32"
    if re.fullmatch(r"c\d+", name):
        return "fp32"
    return "i32"


def low_pointers(params: list[str], src: str, source: str, dtype: str) -> dict[str, str]:
    """A low-precision program's pointers of its dtype, by name (see --dtype)."""
    if not dtype:
        return {}
    out = re.search(r"return (b\d+)", source)
    names = [p for p in params if re.fullmatch(r"t\d+", p) or (out and p == out.group(1))]
    names += ["b_ptr"] + ([] if "float32 value stored" in src else ["a_ptr"])
    return dict.fromkeys(names, LOW[dtype])


def compile_all(
    path: str, arch: int, constexprs: dict[str, Any], dtype: str = ""
) -> list[tuple[str, str]]:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    spec = importlib.util.spec_from_file_location("aot_candidate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    source = Path(path).read_text()
    bf16 = re.search(r"\.to\(torch\.bfloat16\)|_kf_pair\(w, \d, True\)", source) is not None
    results = []
    for name, fn in vars(module).items():
        if not isinstance(fn, triton.runtime.jit.JITFunction) or not name.startswith("_kf_"):
            continue
        params = fn.arg_names
        if not any(p in CONSTEXPRS for p in params):
            continue  # a helper called from kernels
        consts = {p: constexprs.get(p, CONSTEXPRS[p]) for p in params if p in CONSTEXPRS}
        if "BF16" in consts and "BF16" not in constexprs:
            consts["BF16"] = bf16
        if "POOL_W" in consts and "BLOCK_N" not in constexprs:  # as the forward does: the
            consts["BLOCK_N"] = max(1, consts["BLOCK_N"] // consts["POOL_W"])  # GEMM tile stays
        shapes = {**CONSTEXPRS, **consts}
        b_kn = "b_desc.load([k0," in fn.src
        low = low_pointers(params, fn.src, source, dtype)
        signature = {
            p: "constexpr"
            if p in CONSTEXPRS
            else desc_type(p, bf16, b_kn, shapes, low)
            if p.endswith("_desc")
            else arg_type(p, bf16, low)
            for p in params
        }
        try:
            src = ASTSource(fn=fn, signature=signature, constexprs=consts)
            kernel = triton.compile(src, target=GPUTarget("cuda", arch, 32))
            ptx = kernel.asm["ptx"]
            mma = "wgmma" if "wgmma" in ptx else ("mma" if "mma.sync" in ptx else "no mma")
            shared = kernel.metadata.shared
            results.append((name, f"ok ({mma}, {len(kernel.asm['cubin'])} bytes of cubin, "
                                  f"{shared} bytes of shared memory)"))  # fmt: skip
        except Exception as exc:
            results.append((name, f"FAILED {type(exc).__name__}: {str(exc)[:2000]}"))
    return results


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("candidate")
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--set", action="append", default=[], help="NAME=VALUE constexpr")
    parser.add_argument("--dtype", default="", choices=["", *LOW], help="the program's dtype")
    args = parser.parse_args(argv)
    consts = {k: (v == "True" if v in ("True", "False") else int(v))
              for k, v in (s.split("=") for s in args.set)}  # fmt: skip
    results = compile_all(args.candidate, args.arch, consts, args.dtype)
    for name, status in results:
        print(f"{name}: {status}")
    return 0 if results and all(s.startswith("ok") for _, s in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
