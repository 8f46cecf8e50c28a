"""The buffers a forward changes, read in the evaluator's child (the parent compares them).

KernelBench's models are used as constructed, in training mode: a BatchNorm normalizes with
the batch's statistics and updates its running statistics (running_mean, running_var,
num_batches_tracked) on every forward. Those updates are outputs too. The reference's child
records, per verification trial, the buffers that trial's forward changed; the candidate's
child reports its buffers of the same names after the same trials, and the parent compares
them within the policy's tolerance (verify.compare_buffers).

worker.py calls these through this module and the harness checks their identities
(guards.harness_targets): a candidate that rebinds one is rejected.
"""

from __future__ import annotations

from typing import Any

Buffers = dict[str, Any]  # buffer name (as named_buffers gives it) -> a CPU tensor


def snapshot(model: Any) -> Buffers:
    """Every buffer's current value (on its device)."""
    return {name: b.detach().clone() for name, b in model.named_buffers()}


def changed(model: Any, before: Buffers) -> Buffers:
    """The buffers whose value differs from `before` (new ones too; NaN counts as a change,
    harmlessly: the comparison takes NaN for NaN), copied to the CPU."""
    import torch

    return {
        name: b.detach().to("cpu").clone()
        for name, b in model.named_buffers()
        if name not in before or not torch.equal(b, before[name])
    }


def reported(model: Any, names: tuple[str, ...]) -> Buffers:
    """The named buffers the model has, copied to the CPU (a missing one is left out)."""
    own = dict(model.named_buffers())
    return {n: own[n].detach().to("cpu").clone() for n in names if own.get(n) is not None}
