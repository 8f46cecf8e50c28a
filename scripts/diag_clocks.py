"""Does an idle gap before each timed run (the evaluator makes fresh inputs on the host
between runs) slow the next kernel down? One draft, timed with and without gaps."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import torch

from kforge_search.agents.builtin.agent import BuiltinAgent, seed_genome
from kforge_search.evaluator.build import load_candidate_class
from kforge_search.evaluator.timing import capture_clocks
from kforge_search.platforms import get_platform
from kforge_search.problem import exec_problem, resolve_problem


def main(name: str, policy: str) -> None:
    agent, platform = BuiltinAgent(), get_platform("cuda-triton")
    problem = resolve_problem(f"level2/{name}")
    draft = agent.synthesize(
        problem, platform, seed_genome(agent.plan(problem), platform, policy), "d"
    )
    path = Path(tempfile.mkdtemp()) / "candidate.py"
    path.write_text(draft.source)
    module = exec_problem(problem)
    inputs = [x.cuda() for x in module.get_inputs()]
    model = load_candidate_class(str(path), "diag")(*module.get_init_inputs()).cuda()
    ref = module.Model(*module.get_init_inputs()).cuda()
    clocks = capture_clocks("cuda")

    flush = torch.empty(64 * 2**20, device="cuda")
    busy_a = torch.randn(4096, 4096, device="cuda")

    def run_with(label: str, sleep_s: float, work: str, sync: bool) -> None:
        for who, m in (("candidate", model), ("eager", ref)):
            times = []
            for i in range(25):
                time.sleep(sleep_s)
                flush.zero_()
                torch.cuda.synchronize()
                if work == "spin":
                    torch.cuda._sleep(int(1e6))
                elif work == "matmul":
                    for _ in range(10):
                        busy_a @ busy_a
                if sync:
                    torch.cuda.synchronize()
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                m(*inputs)
                end.record()
                torch.cuda.synchronize()
                if i >= 5:
                    times.append(start.elapsed_time(end))
            times.sort()
            print(f"{label:34s} {who:9s} p50 {times[len(times) // 2]:.3f} ms")
            sys.stdout.flush()

    with torch.no_grad():
        for args in [
            ("no gap", 0, "", False),
            ("50ms gap", 0.05, "", False),
            ("50ms gap, spin, no sync", 0.05, "spin", False),
            ("50ms gap, matmuls, sync", 0.05, "matmul", True),
            ("50ms gap, matmuls, no sync", 0.05, "matmul", False),
            ("no gap, spin, no sync", 0, "spin", False),
        ]:
            run_with(*args)
    del clocks


if __name__ == "__main__":
    main(*(sys.argv[1:] or ["01_gemm_bias_relu", "loose"]))
