"""Which tiles suit the builtin agent's slower steps on a GPU (prints figures, changes
nothing): the ieee retry of a problem whose tf32x3 seed fails strict (09_gemm_sum), and the
bf16x3 step of a plain GEMM + tail (01_gemm_bias_relu). Each genome is timed in-process with
screen() (agents/screen.py); accuracy is the evaluator's business. From the repo root on the
GPU machine:  python scripts/screen_steps.py
"""

from __future__ import annotations

import dataclasses

from kforge_search.agents.builtin import genome as gen
from kforge_search.agents.builtin.agent import BuiltinAgent, _three_dot_steps, seed_genome
from kforge_search.agents.builtin.screen import screen
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem

GENES = ("block_m", "block_n", "block_k", "num_warps", "num_stages")
IEEE = [  # values of GENES
    (128, 128, 64, 8, 3), (128, 128, 32, 8, 3), (128, 128, 16, 8, 3), (128, 64, 32, 4, 3),
    (64, 128, 32, 4, 3), (64, 64, 32, 4, 3), (64, 64, 64, 4, 2), (32, 64, 32, 4, 3),
]  # fmt: skip
BF16X3 = [  # block_m, block_n, block_k, num_stages, promote
    (128, 128, 64, 3, 4), (128, 128, 64, 3, 8), (128, 256, 64, 2, 4), (128, 256, 64, 2, 8),
    (128, 128, 32, 4, 8), (128, 256, 32, 3, 8), (256, 128, 64, 2, 8),
]  # fmt: skip


def show(name: str, flops: float, ranked: list) -> None:
    print(f"\n{name}")
    for item in ranked:
        if item.p50_ms is None:
            print(f"  failed     {gen.describe(item.genome)}: {item.error[:100]}")
        else:
            tflops = flops / item.p50_ms / 1e9
            print(f"  {item.p50_ms:8.4f} ms {tflops:6.1f} TFLOP/s  {gen.describe(item.genome)}")


def main() -> None:
    agent, platform = BuiltinAgent(), get_platform("cuda-triton")
    for problem_name, kind in (("level2/09_gemm_sum", "ieee"), ("level2/01_gemm_bias_relu", "x3")):
        problem = resolve_problem(problem_name)
        plan = agent.plan(problem)
        seed = seed_genome(plan, platform, "strict")
        flops = 2.0 * sum(b * m * n * k for b, m, n, k in plan.graph.work.gemms)
        if kind == "ieee":
            genomes = [
                dataclasses.replace(
                    seed, precision="ieee", loads=loads, **dict(zip(GENES, tiles, strict=True))
                )
                for tiles in IEEE
                for loads in ("tma", "pointer")
            ]
        else:
            steps = [g for g, _ in _three_dot_steps(plan, seed)]
            bf16 = next(g for g in steps if g.precision == "bf16x3")
            genomes = [seed, *steps] + [
                dataclasses.replace(
                    bf16, block_m=bm, block_n=bn, block_k=bk, num_stages=s, promote=p
                )
                for bm, bn, bk, s, p in BF16X3
            ]
        genomes = list(dict.fromkeys(gen.repair(g, "strict") for g in genomes))
        show(f"{problem_name} ({kind})", flops, screen(agent, problem, platform, genomes))


if __name__ == "__main__":
    main()
