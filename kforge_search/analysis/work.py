"""The work one forward call of a problem must do: FLOPs and the bytes that must move.

The builtin synthesizer counts the work of the graphs it traces (`plan.graph.work`); for the
rest, `counted_work` runs torch's FLOP counter over the reference on meta tensors (no memory,
no compute), with the inputs', parameters' and outputs' sizes as the bytes. The analyst
(agents/llm/analyst.py) takes the traced figure where there is one.
"""

from __future__ import annotations

from dataclasses import dataclass

from kforge_search.problem import Problem


@dataclass(frozen=True)
class Work:
    flops: float
    min_bytes: float
    source: str  # "traced" (builtin graph) or "flop-counter" (torch, matmuls and convs only)


def counted_work(problem: Problem) -> Work | str:
    """The problem's work by torch's FLOP counter, or why it could not be counted."""
    try:
        return _counted(problem)
    except Exception as exc:
        return f"work not counted: {type(exc).__name__}: {exc}"


def _counted(problem: Problem) -> Work:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from kforge_search.problem import exec_problem

    module = exec_problem(problem)
    with torch.device("meta"):
        model = module.Model(*module.get_init_inputs())
    inputs = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        out = model(*inputs)
    outs = out if isinstance(out, list | tuple) else [out]
    tensors = [*inputs, *model.parameters(), *model.buffers(), *outs]
    nbytes = sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))
    return Work(float(counter.get_total_flops()), float(nbytes), "flop-counter")
