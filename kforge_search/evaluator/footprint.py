"""A problem's memory footprint, and the evaluator's memory limits scaled to it.

The reference's child measures what one forward call holds on the meta device (no memory, no
compute): its inputs, its outputs (the float32 ones apart: the float64 reference keeps a copy
of each, twice their size), its parameters and buffers (`measure`). What each child holds
follows from that (`need_bytes`): every verification trial's outputs (the reference's child,
a candidate's, a baseline's, which also loads the reference's and their float64 copies), a
candidate's kept timed runs, and one call's working set (on the CPU: its inputs, drawn and
moved, intermediates, the float64 run's copies; on an accelerator, the inputs drawn on the
host). A child's memory limit is `limit_mb`: the configured limit plus HEADROOM x that need,
at most MACHINE_SHARE of the machine: a small problem's limits are what they were, and a
large one (a 32768 x 32768 output is 4 GiB, x9 trials) is not killed at a fixed cap it was
always going to exceed.

Where the machine cannot hold the data an evaluation holds at once (`machine_need`: the parent
keeps the reference's outputs and their float64 copies while a candidate's or a baseline's
child holds its own), the problem cannot run here at these sizes: the reference's child
fails at once with how much it needs, what the machine has, and the sizes to `--set`
(`shortfall`), instead of a memory kill part-way or the kernel's OOM killer ending the
bench. The same on the device for one call (`device_shortfall`).

On a CUDA device against a streamed reference (`cuda_streamed_bytes`) no process keeps the
outputs on the host by design: the candidate hands its outputs to the oracle by CUDA IPC,
inputs are drawn on the device, the oracle compares there and the parent gets the verdict
alone. What is counted are the paths that do reach the host: the oracle's comparison where
its device has no room (39_L2Norm's oracle, 8 GiB outputs, was killed at 26 GB of host
memory on a shared host), a float64 run moved to the host, outputs that cannot be shared,
inputs that cannot be drawn on the device.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kforge_search.evaluator.timed_check import reveal_counts

GiB = 2**30
BASE_BYTES = 4 * GiB  # a worker's own: Python, torch, the CUDA context's host side, compilers
HEADROOM = 1.25  # a child's limit over its estimated need
MACHINE_SHARE = 0.9  # of the machine's memory (or its cgroup's): what an evaluation may hold
KEPT_TIMED_RUNS = 3  # a candidate's timed runs whose outputs it keeps, at least (timed_runs.py)
ORACLE_RUNS = 4  # timed runs and back-to-back calls an oracle answers for at once (about)
MODES = ("reference", "candidate", "baseline", "oracle", "ncu")
MACHINE_ENV = "KFORGE_MACHINE_MB"  # a smaller machine than this one, in MiB (tests)


@dataclass(frozen=True)
class Footprint:
    """What one forward call holds, in bytes."""

    inputs: int
    outputs: int
    float32_outputs: int  # of `outputs`: the float64 reference keeps a copy of these
    params: int  # parameters and buffers
    note: str = ""  # how it was measured where not exactly (outputs estimated)

    @property
    def call_bytes(self) -> int:
        """One call's data: its inputs, outputs, parameters and buffers."""
        return self.inputs + self.outputs + self.params

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Footprint:
        return cls(**data)

    def describe(self) -> str:
        return (
            f"one call's inputs {_gib(self.inputs)}, outputs {_gib(self.outputs)}, parameters "
            f"and buffers {_gib(self.params)}" + (f" ({self.note})" if self.note else "")
        )

    @staticmethod
    def largest(*prints: Footprint | None) -> Footprint | None:
        """Field by field, the largest of those given (the problem's sizes and its unseen)."""
        given = [p for p in prints if p is not None]
        if not given:
            return None
        return Footprint(*(max(getattr(p, f) for p in given) for f in
                           ("inputs", "outputs", "float32_outputs", "params")))  # fmt: skip


def _gib(n: float) -> str:
    """Bytes as a person reads them: GiB from 1 GiB up, else MiB."""
    return f"{n / GiB:.2f} GiB" if n >= GiB else f"{n / 2**20:.1f} MiB"


def _bytes(values: Any) -> int:
    import torch

    items = values if isinstance(values, list | tuple) else [values]
    return sum(t.numel() * t.element_size() for t in items if isinstance(t, torch.Tensor))


def measure(module: Any) -> Footprint | str:
    """The problem's footprint on the meta device, or why it could not be measured. Outputs
    of a forward that does not run on meta (data-dependent shapes) are estimated as the
    inputs' size."""
    import torch

    try:
        with torch.device("meta"):
            model = module.Model(*module.get_init_inputs())
            inputs = [x.to("meta") if isinstance(x, torch.Tensor) else x
                      for x in module.get_inputs()]  # fmt: skip
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc)[:200]}"
    params = _bytes([*model.parameters(), *model.buffers()])
    try:  # on meta too: what the forward creates (a temporary) takes no memory here
        with torch.device("meta"), torch.no_grad():
            out = model(*inputs)
    except Exception as exc:
        size = _bytes(inputs)
        why = f"outputs estimated: the forward does not run on meta ({type(exc).__name__})"
        return Footprint(size, size, size, params, why)
    outs = list(out) if isinstance(out, list | tuple) else [out]
    f32 = [t for t in outs if isinstance(t, torch.Tensor) and t.dtype == torch.float32]
    return Footprint(_bytes(inputs), _bytes(outs), _bytes(f32), params)


def reference_bytes(fp: Footprint, trials: int) -> int:
    """The reference's outputs over its trials and their float64 copies (the parent holds
    them while the problem is searched; a baseline's child loads them), where it keeps them:
    one trial's (`trials` 1) where it streams."""
    return trials * (fp.outputs + 2 * fp.float32_outputs)


def streamed(fp: Footprint, trials: int, keep_bytes: int) -> bool:
    """Whether the reference streams: its trials' outputs and float64 copies take more than
    `keep_bytes` (0: never). Then no process holds more than one trial of them: its child
    keeps trial 0 alone, and as the oracle recomputes one trial at a time when a candidate
    is compared (oracle_compare.py, trial_check.py); a baseline's kinds are not
    checked."""
    return keep_bytes > 0 and reference_bytes(fp, trials) > keep_bytes


def need_bytes(fp: Footprint, mode: str, device: str, trials: int, stream: bool = False) -> int:
    """The problem's data a child of `mode` holds in host memory at most, estimated (the
    process's own memory, BASE_BYTES or so, apart); `stream`: the reference streams (on
    CUDA then: cuda_streamed_bytes)."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: one of {', '.join(MODES)}")
    if stream and device.startswith("cuda"):
        return cuda_streamed_bytes(fp, mode)
    one = reference_bytes(fp, 1)  # one trial's outputs and their float64 copies
    held = {
        # streamed: trial 0 kept, the trial at hand; then, as the oracle, its answers
        "reference": max(fp.outputs + one, ORACLE_RUNS * fp.outputs)
        if stream
        else reference_bytes(fp, trials),
        # streamed: nothing to check its kinds against; else the reference and its own
        "baseline": 0 if stream else reference_bytes(fp, trials) + trials * fp.outputs,
        # one verification trial at a time (worker.verify_trials), its kept timed runs
        "candidate": (1 + KEPT_TIMED_RUNS) * fp.outputs,
        # held: the reference's trials once, read on their way to the device (oracle_held)
        "oracle": max(ORACLE_RUNS * fp.outputs, one if stream else reference_bytes(fp, trials)),
        "ncu": 0,
    }[mode]
    if device == "cpu":  # drawn and moved inputs, intermediates, the float64 run's copies
        working = 4 * (fp.inputs + fp.outputs) + 3 * fp.params
    else:  # inputs drawn on the host, then moved; an output on its way back
        working = 2 * fp.inputs + fp.outputs
    return held + working


def machine_need(fp: Footprint, device: str, trials: int, stream: bool = False) -> int:
    """The problem's data an evaluation holds in host memory at once, at its largest: the
    parent's copy of the reference (streamed: one trial's, from the oracle, whose child
    holds it too) beside a candidate's child (and the candidate's trial the parent compares)
    or beside a baseline's child; or the reference's child alone, before it hands over. The
    processes' own memory (BASE_BYTES each) is not in it.

    On CUDA against a streamed reference the parent holds no outputs (it hands the oracle
    file paths and gets verdicts: trial_check.py, oracle.py), only each kept trial's changed
    buffers (Reference.buffers: at most the parameters' size each); beside it the oracle and
    the candidate's child, both at their peaks, though the parent's turns make them
    alternate (the candidate lets its host copies go before it says `trial` or `revealed`:
    worker.verify_trials, timed_runs.save_chosen): the sum leaves room for what is not
    counted (a float64 run's intermediates on the host). A baseline's child (less than a
    candidate's) comes beside an idle oracle; the reference's child comes alone."""
    if stream and device.startswith("cuda"):
        oracle = cuda_streamed_bytes(fp, "oracle")
        beside = oracle + cuda_streamed_bytes(fp, "candidate")
        return trials * fp.params + max(cuda_streamed_bytes(fp, "reference"), beside)
    held = reference_bytes(fp, 1 if stream else trials)
    oracle = need_bytes(fp, "oracle", device, trials, stream) if stream else 0
    beside = max(
        need_bytes(fp, "candidate", device, trials, stream) + fp.outputs + oracle,
        need_bytes(fp, "baseline", device, trials, stream),
    )
    alone = need_bytes(fp, "reference", device, trials, stream)
    return max(alone, held + beside)


def float64_on_host(fp: Footprint) -> int:
    """A float64 run moved to the host where the device ran out of memory for it
    (exact.float64_step, exact.py:233-236): its float32 inputs copied there, then their
    float64 copies (3 x inputs, exact.py:246-253, 261), its float64 outputs (2 x outputs),
    the model in float64 (2 x parameters). Its intermediates the footprint does not know."""
    return 3 * fp.inputs + 2 * fp.outputs + 2 * fp.params


def cuda_streamed_bytes(fp: Footprint, mode: str) -> int:
    """need_bytes on a CUDA device against a streamed reference: what a child of `mode` may
    hold on the host, where a path copies there (its outputs stay on the device otherwise).

    - drawn: inputs that cannot be drawn on the device are drawn on the host and moved, a
      wide-range or shifted trial's made from them there first (2 x inputs: inputs.drawn,
      make_inputs), in every child.
    - candidate: drawn, and the chosen timed runs' and burst calls' outputs (reveal_counts:
      2 for outputs over a third of a GiB) copied to the host where they cannot
      be shared by CUDA IPC (shared_outputs._entry, timed_runs.save_chosen); a
      verification trial's outputs (one) likewise (worker.verify_trials). Its kept timed
      runs stay on the device (time_model).
    - oracle: a trial compared on the host, where its device has no room for 8 x the
      outputs (oracle_compare.compare_device) or runs out (verify._compared): the
      reference's outputs (reference_child.replay), the candidate's as read from a file
      where they could not be shared (2 x outputs), the float64 outputs on the host
      (float64_row; float64_on_host, which counts them, where that run moved there too).
      Or the chosen timed runs: those read from the file, and the reference's and the
      candidate's run copied to the host where the device runs out (compare_run).
    - reference: its trials on the host where the device has no room for them
      (stays_on_device): trial 0's outputs and the trial's (2 x outputs) and the float64
      run's as the oracle's; then it is the oracle.
    - baseline, ncu: drawn (a streamed reference's kinds are not checked: no reference
      loaded, baseline_child.loaded_reference; no timed run kept).
    """
    drawn = 2 * fp.inputs
    revealed = sum(reveal_counts(fp.outputs)) * fp.outputs
    trial = 2 * fp.outputs + float64_on_host(fp)
    oracle = max(trial, revealed + fp.outputs + drawn)
    return {
        "reference": oracle,
        "oracle": oracle,
        "candidate": drawn + revealed,
        "baseline": drawn,
        "ncu": drawn,
    }[mode]


def machine_room() -> int:
    """What an evaluation's data may take of the machine: MACHINE_SHARE of it, less one
    process's own."""
    return int(MACHINE_SHARE * machine_bytes()) - BASE_BYTES


def machine_bytes() -> int:
    """The machine's memory, or its cgroup's limit where that is lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if (given := os.environ.get(MACHINE_ENV, "")).isdigit():  # less only: a test's machine
        total = min(total, int(given) * 2**20)
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


def cap_mb() -> int:
    """The most memory any one child may be allowed."""
    return int(MACHINE_SHARE * machine_bytes() / 2**20)


def limit_mb(
    floor_mb: int, fp: Footprint | None, mode: str, device: str, trials: int, stream: bool = False
) -> int:
    """A child's memory limit: the configured one (`floor_mb`; 0: none: the process's own
    and a small problem's) plus HEADROOM x the problem's data it is estimated to hold,
    within MACHINE_SHARE of the machine (or the configured limit, where that is more)."""
    if not floor_mb or fp is None:
        return floor_mb
    scaled = floor_mb + int(HEADROOM * need_bytes(fp, mode, device, trials, stream) / 2**20)
    return min(scaled, max(floor_mb, cap_mb()))


def sizes_hint(problem: Any) -> str:
    """Which sizes to make smaller, and how."""
    from kforge_search import pysource
    from kforge_search.sizes import size_slots

    try:
        names = list(dict.fromkeys(s.name for s in size_slots(pysource.parse(problem.source))))
    except (SyntaxError, ValueError):
        names = []
    values = problem.sizes
    shown = ", ".join(f"{n}={values[n]}" for n in names if n in values)
    ways = [f"--set NAME=VALUE on its sizes ({shown})" if shown else "--set NAME=VALUE"]
    sets = [n for n, _ in problem.size_sets if n not in ("unseen", problem.size_set)]
    ways += [f"--sizes {sets[0]}"] if sets else []
    return f"run it at smaller sizes: {', or '.join(ways)}"


def shortfall(problem: Any, fp: Footprint, device: str, trials: int, stream: bool = False) -> str:
    """Why the machine cannot evaluate the problem at these sizes ("" where it can)."""
    need, room = machine_need(fp, device, trials, stream), machine_room()
    if need <= room:
        return ""
    if stream and device.startswith("cuda"):
        held = (
            "the oracle that recomputes a trial may compare it on the host where the device "
            f"is full, {_gib(cuda_streamed_bytes(fp, 'oracle'))} with a float64 run moved "
            "there, beside the candidate's copies of outputs it cannot share"
        )
    elif stream:
        held = (
            f"one trial's outputs and their float64 copies, {_gib(reference_bytes(fp, 1))}, "
            "are held at once by the oracle that recomputes them and by the evaluator that "
            "compares a candidate's with them"
        )
    else:
        held = (
            f"the reference's {trials} trials' outputs and their float64 copies, "
            f"{_gib(reference_bytes(fp, trials))}, are kept while a candidate's or a "
            "baseline's are compared with them"
        )
    return (
        f"at these sizes its evaluation needs about {_gib(need)} of host memory at once, and "
        f"this machine has {_gib(max(room, 0))} for it: {sizes_hint(problem)}. ({fp.describe()};"
        f" {held}.)"
    )


def device_shortfall(problem: Any, fp: Footprint, free: int, total: int) -> str:
    """Why one call cannot run on the device (`free` and `total` bytes; "" where it can)."""
    need = fp.call_bytes
    if need <= free:
        return ""
    return (
        f"one call needs at least {_gib(need)} of device memory ({fp.describe()}), and the "
        f"device has {_gib(free)} free of {_gib(total)}: {sizes_hint(problem)}"
    )


def out_of_memory(problem: Any, fp: Footprint | None, where: str, exc: BaseException) -> str:
    """The reference ran out of memory (`where`: "device" or "host") part-way."""
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    sizes = f" ({fp.describe()})" if fp is not None else ""
    hint = sizes_hint(problem)
    return (
        f"the reference ran out of {where} memory{sizes}: {type(exc).__name__}: {first}. "
        f"{hint[0].upper()}{hint[1:]}"
    )
