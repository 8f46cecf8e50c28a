"""Does an idle gap before each timed run (the evaluator makes fresh inputs on the host
between runs) slow the next kernel down? One draft, timed with and without gaps."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import torch

from kforge_search.agents.builtin import BuiltinAgent, seed_genome
from kforge_search.evaluator.build import load_candidate_class
from kforge_search.evaluator.timing import capture_clocks, time_cuda_events
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

    def gap(seconds: float, spin_ms: float = 0.0):
        def between(run: int) -> None:
            time.sleep(seconds)
            if spin_ms:
                torch.cuda._sleep(int(spin_ms * 1.98e6))  # ~1.98 GHz SM clock

        return between

    with torch.no_grad():
        for label, hook in [
            ("no gap", gap(0)),
            ("50 ms gap", gap(0.05)),
            ("50 ms gap + 2 ms spin", gap(0.05, 2)),
            ("200 ms gap", gap(0.2)),
            ("200 ms gap + 2 ms spin", gap(0.2, 2)),
            ("200 ms gap + 10 ms spin", gap(0.2, 10)),
        ]:
            for who, m in (("candidate", model), ("eager", ref)):
                t = time_cuda_events(lambda m=m: m(*inputs), clocks, 5, 20, hook)
                print(f"{label:26s} {who:9s} p50 {t.p50_ms:.3f} ms  p20 {t.p20_ms:.3f}")
            sys.stdout.flush()


if __name__ == "__main__":
    main(*(sys.argv[1:] or ["01_gemm_bias_relu", "loose"]))
