"""Why a draft's time differs between the in-process screen and the evaluator: one draft,
timed both ways (and with pointer loads), with host times. Prints figures only."""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import torch

from kforge_search.agents.builtin.agent import BuiltinAgent, seed_genome
from kforge_search.agents.builtin.screen import screen
from kforge_search.evaluator.build import load_candidate_class
from kforge_search.evaluator.pipeline import EvalConfig, Evaluator
from kforge_search.evaluator.timing import capture_clocks, time_cuda_events
from kforge_search.platforms import get_platform
from kforge_search.problem import exec_problem, resolve_problem


def main(name: str, policy: str) -> None:
    agent, platform = BuiltinAgent(), get_platform("cuda-triton")
    problem = resolve_problem(f"level2/{name}")
    seed = seed_genome(agent.plan(problem), platform, policy)
    for genome in (seed, dataclasses.replace(seed, loads="pointer")):
        draft = agent.synthesize(problem, platform, genome, "diag")
        path = Path(tempfile.mkdtemp()) / "candidate.py"
        path.write_text(draft.source)
        module = exec_problem(problem)
        torch.manual_seed(0)
        inputs = [x.cuda() for x in module.get_inputs()]
        model = load_candidate_class(str(path), f"diag_{genome.loads}")(
            *module.get_init_inputs()
        ).cuda()
        with torch.no_grad():
            t = time_cuda_events(lambda m=model, x=inputs: m(*x), capture_clocks("cuda"), 10, 50)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(100):
                model(*inputs)
            host = (time.perf_counter() - t0) * 10
            torch.cuda.synchronize()
        print(
            f"{genome.loads}: in-process p50 {t.p50_ms:.3f} ms host p50 {t.host_p50_ms:.3f} ms,"
            f" host per call (no sync) {host:.3f} ms"
        )
        s = screen(agent, problem, platform, [genome])
        print(f"{genome.loads}: screen p50 {s[0].p50_ms:.3f} ms")
        res = Evaluator(EvalConfig(policy=policy, baselines=())).evaluate_source(
            draft.source, problem, platform
        )
        tm = res.timing
        print(
            f"{genome.loads}: evaluator {res.status.name} p50 {tm.p50_ms if tm else None} "
            f"host {tm.host_p50_ms if tm else None} p20 {tm.p20_ms if tm else None}"
        )
        sys.stdout.flush()


if __name__ == "__main__":
    main(*(sys.argv[1:] or ["01_gemm_bias_relu", "loose"]))
