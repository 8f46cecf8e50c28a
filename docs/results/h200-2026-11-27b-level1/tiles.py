"""Exploration: time the builtin synthesizer's kernels under several genomes against eager
and torch.compile, at the published sizes (not the evaluator: for choosing seeds)."""
import dataclasses, importlib.util, json, sys, time, traceback
from pathlib import Path
import torch, triton
from kforge_search.problem import load_problem
from kforge_search.platforms import get_platform
from kforge_search.agents.builtin.agent import BuiltinAgent, seed_genome
from kforge_search.agents.builtin import genome as gen

import os
DRY = os.environ.get("TRITON_INTERPRET") == "1"
DEV = "cpu" if DRY else "cuda"
L1 = Path("out/kb/level1")
plat = get_platform("cuda-triton")
out = []

def bench(fn):
    if DRY:
        t = time.perf_counter(); fn(); return (time.perf_counter() - t) * 1e3
    return triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median")

def load(src, tag):
    p = Path(f"/tmp/tiles_{tag}.py"); p.write_text(src)
    spec = importlib.util.spec_from_file_location(f"tiles_{tag}", p)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m

def run(name, policy, variants):
    prob = load_problem(str(L1 / f"{name}.py"))
    if DRY:
        prob = prob.resized("ci")
    ns = {"__name__": "tiles_prog"}
    exec(compile(prob.program(), prob.path, "exec"), ns)
    prog = type("P", (), {k: staticmethod(v) if callable(v) and not isinstance(v, type) else v for k, v in ns.items() if k in ("Model", "get_inputs", "get_init_inputs")})
    a = BuiltinAgent(); plan = a.plan(prob)
    seed = seed_genome(plan, plat, policy)
    torch.manual_seed(0)
    init = prog.get_init_inputs()
    ref = prog.Model(*init).to(DEV)
    torch.manual_seed(1)
    xs = [x.to(DEV) if isinstance(x, torch.Tensor) else x for x in prog.get_inputs()]
    with torch.no_grad():
        want = ref(*xs)
        row = {"problem": name, "policy": policy}
        row["eager"] = bench(lambda: ref(*xs))
        torch.backends.cuda.matmul.allow_tf32 = True
        row["eager_tf32"] = bench(lambda: ref(*xs))
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            if DRY: raise RuntimeError("dry")
            c = torch.compile(ref); c(*xs); row["compile"] = bench(lambda: c(*xs))
        except Exception as e:
            row["compile"] = repr(e)[:100]
        row["variants"] = []
        for i, (label, change) in enumerate([("seed", {}), *variants]):
            try:
                g = dataclasses.replace(seed)
                for k, v in change.items():
                    object.__setattr__(g, k, v)  # past the genome's bounds: exploring
                d = a.synthesize(prob, plat, g, label)
                m = load(d.source, f"{name}_{policy}_{i}".replace(".", "_"))
                torch.manual_seed(0)
                new = m.ModelNew(*init).to(DEV)
                try: new.load_state_dict(ref.state_dict(), strict=False)
                except Exception: pass
                got = new(*xs)
                err = (got.float() - want.float()).abs().max().item()
                ms = bench(lambda: new(*xs))
                row["variants"].append({"label": label, "genome": gen.describe(g), "ms": ms, "err": err})
            except Exception as e:
                row["variants"].append({"label": label, "error": repr(e)[:300]})
            torch.cuda.empty_cache()
    del want, xs, ref
    torch.cuda.empty_cache()
    print(json.dumps(row), flush=True)
    out.append(row)

EW = [("g1", dict(group_m=1)), ("16x512 g1", dict(group_m=1, block_n=512)),
      ("16x1024 g1 w8", dict(group_m=1, block_n=1024, num_warps=8)),
      ("32x256 g1 w8", dict(group_m=1, block_m=32, num_warps=8)),
      ("16x128 g1", dict(group_m=1, block_n=128))]
ROWS = [("pb2048 w8", dict(pass_block=2048, pass_warps=8)), ("pb4096 w8", dict(pass_block=4096, pass_warps=8)),
        ("pb4096 w16", dict(pass_block=4096, pass_warps=16)), ("g1", dict(group_m=1)), ("nosplit", dict(pass_programs=0))]
GEMM = [("tf32rn", dict(precision="tf32rn")), ("tf32 128x128x32 s4 w4", dict(precision="tf32", block_m=128, block_n=128, block_k=32, num_stages=4, num_warps=4)),
        ("tf32 128x256x32 s3 w8", dict(precision="tf32", block_m=128, block_n=256, block_k=32, num_stages=3, num_warps=8)),
        ("tf32 128x128x64 s3 w8", dict(precision="tf32", block_m=128, block_n=128, block_k=64, num_stages=3, num_warps=8)),
        ("tf32 ptr", dict(precision="tf32", loads="pointer")),
        ("bf16x3 128x128x64", dict(precision="bf16x3", block_m=128, block_n=128, block_k=64)),]
JOBS = {
  "a": [("19_ReLU", "strict", EW), ("5_Matrix_scalar_multiplication", "strict", EW), ("47_Sum_reduction_over_a_dimension", "strict", EW),
        ("51_Argmax_over_a_dimension", "strict", EW), ("94_MSELoss", "strict", EW + ROWS), ("23_Softmax", "strict", ROWS),
        ("40_LayerNorm", "strict", ROWS), ("33_BatchNorm", "strict", ROWS), ("37_FrobeniusNorm_", "strict", ROWS)],
  "b": [("1_Square_matrix_multiplication_", "loose", GEMM), ("2_Standard_matrix_multiplication_", "loose", GEMM),
        ("16_Matmul_with_transposed_A", "loose", GEMM), ("13_Matmul_for_symmetric_matrices", "loose", GEMM),
        ("6_Matmul_with_large_K_dimension_", "loose", GEMM + [("splitk4", dict(precision="tf32", split_k=4))]),
        ("8_Matmul_with_irregular_shapes_", "loose", GEMM), ("41_Max_Pooling_1D", "strict", EW), ("95_CrossEntropyLoss", "strict", ROWS + EW)],
}
for name, policy, variants in JOBS[sys.argv[1]][: int(sys.argv[2]) if len(sys.argv) > 2 else None]:
    t = time.time()
    try:
        run(name, policy, variants)
    except Exception:
        traceback.print_exc()
    print(f"# {name} {time.time()-t:.0f}s", flush=True)
