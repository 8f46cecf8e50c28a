"""The peers a candidate's speedup is measured against (docs/evaluator.md, "Peers").

A peer is a baseline kind: a mode (`eager`, `compile`) and a precision, `fp32` or one of the
platform's reduced ones: on CUDA `tf32` (TF32 matmuls and convolutions, float32 matmul
precision "high") and `autocast` (the forward under `torch.autocast` to bfloat16, its
outputs cast back to float32: what a user with a loose tolerance writes next), on CPU `bf16`
(float32 matmul precision "medium": oneDNN may compute float32 matmuls in bfloat16). Kinds
are named "eager", "compile", "eager-tf32", "compile-autocast", ...

Every kind but fp32 eager (the reference itself) is verified in the baseline child on the
verification trials' inputs against the reference, with verify.compare_outputs, under each
policy (`PeerCheck`), and where the evaluation has unseen sizes, again there (a new model
built at those sizes, on the unseen reference's trials): the checks a candidate meets. A
reduced kind whose outputs are bitwise the reference's changes nothing on the problem: it
is no peer. A kind is admissible under a policy when it passed there at both sizes
(`refusal` says why not); the speedup of record is over the fastest admissible kind
(`peer_of_record`), and the fp32 figure (the faster of fp32 eager and fp32 compile,
unchecked, as before) stays beside it (`fastest_fp32`). Selection is pure; the child's
side is `check_kind`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kforge_search.evaluator.result import Baseline, PeerCheck

MODES = ("eager", "compile")
FP32 = "fp32"
AUTOCAST = "autocast"
REDUCED = {"cuda": ("tf32", AUTOCAST), "cpu": ("bf16",)}  # by torch device type
_ALL_REDUCED = tuple(dict.fromkeys(p for ps in REDUCED.values() for p in ps))
# in the baseline cache key: entries timed before kinds were checked (1: before they were
# checked at the unseen sizes too) are not reused
VERSION = 2
SAME = "changes no output of this problem (bitwise the reference's on every trial): no peer"
# Baseline.unseen: the kind was checked at the problem's unseen sizes, or their reference
# streams (not held by the parent, as a streamed reference at the problem's sizes: only
# fp32 kinds stay admissible unchecked there); "": the evaluation has no unseen sizes
CHECKED, STREAMED = "checked", "streamed"


def kind_name(mode: str, precision: str = FP32) -> str:
    return mode if precision == FP32 else f"{mode}-{precision}"


def split_kind(kind: str) -> tuple[str, str]:
    """("compile", "tf32") from "compile-tf32"; ("eager", "fp32") from "eager"."""
    mode, _, precision = kind.partition("-")
    if mode not in MODES or precision not in ("", *_ALL_REDUCED):
        raise ValueError(
            f"unknown baseline kind {kind!r}: use {', '.join(MODES)}, optionally with "
            f"-{' or -'.join(sorted(_ALL_REDUCED))}"
        )
    return mode, precision or FP32


def kinds_for(modes: Sequence[str], device: str, reduced: bool) -> tuple[str, ...]:
    """The kinds to time for these fp32 modes on a device ("cuda", "cpu"): the modes, then
    each again at each of the device's reduced precisions when asked."""
    precisions = REDUCED.get(device.split(":")[0], ()) if reduced else ()
    return (*modes, *(kind_name(m, p) for p in precisions for m in modes))


@contextlib.contextmanager
def precision(name: str) -> Iterator[None]:
    """torch's float32 matmul and convolution settings for a precision, restored after
    (`autocast`: fp32's; the kind's model is `runnable`'s)."""
    import torch

    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    saved = (matmul.allow_tf32, cudnn.allow_tf32, torch.get_float32_matmul_precision())
    try:
        if name == "tf32":
            matmul.allow_tf32 = cudnn.allow_tf32 = True
            torch.set_float32_matmul_precision("high")
        elif name == "bf16":
            torch.set_float32_matmul_precision("medium")
        elif name not in (FP32, AUTOCAST):
            raise ValueError(f"unknown precision {name!r}: use fp32, tf32, bf16 or autocast")
        yield
    finally:
        torch.set_float32_matmul_precision(saved[2])
        matmul.allow_tf32, cudnn.allow_tf32 = saved[0], saved[1]


# -- the baseline child's side ----------------------------------------------------------


def runnable(model: Any, precision_name: str, device: str) -> Any:
    """What a kind at `precision_name` runs (and compiles) of `model`: the model itself, or
    for `autocast` a module that runs its forward under `torch.autocast(bfloat16)` and casts
    the bfloat16 outputs that autocast made back to float32 (none where the call's inputs
    or the model's tensors are bfloat16 themselves: those are the problem's own)."""
    if precision_name != AUTOCAST:
        return model
    import torch

    own = any(t.dtype == torch.bfloat16 for t in (*model.parameters(), *model.buffers()))

    class Autocast(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, *args: Any) -> Any:
            with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16):
                out = self.inner(*args)
            if own or any(isinstance(a, torch.Tensor) and a.dtype == torch.bfloat16
                          for a in args):  # fmt: skip
                return out
            if isinstance(out, torch.Tensor):
                return out.float() if out.dtype == torch.bfloat16 else out
            return type(out)(o.float() if isinstance(o, torch.Tensor)
                             and o.dtype == torch.bfloat16 else o for o in out)  # fmt: skip

    return Autocast()


def same_outputs(expected: Sequence[Sequence[Any]], actual: Sequence[Sequence[Any]]) -> bool:
    """Bitwise the same outputs (NaN where NaN) on every trial."""
    import torch

    def same(e: Any, a: Any) -> bool:
        return e.shape == a.shape and e.dtype == a.dtype and torch.equal(
            e.nan_to_num(), a.nan_to_num()
        ) and torch.equal(e.isnan(), a.isnan())  # fmt: skip

    return len(expected) == len(actual) and all(
        len(e) == len(a) and all(same(x, y) for x, y in zip(e, a, strict=True))
        for e, a in zip(expected, actual, strict=True)
    )


def check_kind(
    run_trials: Callable[[], tuple[list[list[Any]], list[dict[str, Any]]]],
    reference: dict[str, Any],
    reduced: bool,
    scales: Sequence[Sequence[float]] | None = None,
    ran: Callable[[], object] = bool,
    unseen: bool = False,
) -> tuple[tuple[PeerCheck, ...], str]:
    """(checks under each policy, note) for one kind: `run_trials` gives its outputs and
    buffers on the reference's trials; `reference` is what pipeline wrote for the child
    (outputs, buffers, exact, trial_ids, wide); `scales`: atol's factors for it
    (verify.atol_scales, computed once per child); `ran()` once the trials have run, before
    the comparisons (where they are on the CPU, the child leaves the device lock for them);
    `unseen`: the reference is the one at the problem's unseen sizes (the checks say so).
    A reduced kind bitwise equal to the reference gets no checks and the note SAME (at the
    problem's sizes: at the unseen ones that only means it passes)."""
    from kforge_search.evaluator.policy import POLICIES
    from kforge_search.evaluator.verify import compare_outputs

    outputs, buffers = run_trials()
    ran()
    if reduced and not unseen and same_outputs(reference["outputs"], outputs):
        return (), SAME
    checks = []
    for name, policy in POLICIES.items():
        found = compare_outputs(
            reference["outputs"],
            outputs,
            policy,
            reference["buffers"],
            buffers,
            exact=reference["exact"],
            trial_ids=reference["trial_ids"],
            wide=reference["wide"],
            plain=reference.get("plain"),
            scales=scales,
        )
        c, m = found.correctness, found.mismatch
        why = "" if m is None else f"trial {m.trial} output {m.output_index}: {m.reason}"
        checks.append(PeerCheck(name, found.ok, c.max_abs_err, c.max_rel_err, why, unseen))
    return tuple(checks), ""


# -- selection (pure) -------------------------------------------------------------------


def _timed(b: Baseline) -> bool:
    return b.ok and b.timing is not None and b.timing.meaningful and b.timing.p50_ms > 0


def refusal(b: Baseline, policy: str) -> str:
    """Why the kind's checks keep it from being the peer of record under `policy`, "" where
    they admit it: fp32 eager (the reference) always; else its check under the policy must
    have passed, at the problem's sizes and, where the evaluation has unseen sizes
    (`Baseline.unseen`), at those too. Unchecked: an fp32 kind is admitted as before (an
    entry cached before kinds were checked; a streamed reference's); a reduced one never."""
    mode, precision = split_kind(b.kind)
    if (mode, precision) == ("eager", FP32):
        return ""
    for unseen in (False, True) if b.unseen else (False,):
        where = " at the unseen sizes" if unseen else ""
        check = b.check(policy, unseen)
        if check is None:  # fp32 unchecked: an older entry's, a streamed reference's
            if precision == FP32 and not b.note and (not unseen or b.unseen == STREAMED):
                continue
            if b.note:
                return b.note
            why = " (their reference streams)" if unseen and b.unseen == STREAMED else ""
            return f"not checked under {policy}{where}{why}: no peer"
        if not check.passed:
            return f"fails {policy}{where}: {check.mismatch}"
    return ""


def refusals(b: Baseline) -> str:
    """Why a timed kind is no peer under each policy where it is none ("" where it is one
    under every policy), for a table's line."""
    from kforge_search.evaluator.policy import POLICIES

    return "; ".join(dict.fromkeys(why for p in POLICIES if (why := refusal(b, p))))


def admissible(b: Baseline, policy: str) -> bool:
    """Whether a timed kind may be the peer of record under `policy` (`refusal`)."""
    return _timed(b) and not refusal(b, policy)


def peer_of_record(baselines: Sequence[Baseline], policy: str) -> Baseline | None:
    """The fastest admissible kind (by p50), None when none was timed."""
    found = [b for b in baselines if admissible(b, policy)]
    return min(found, key=lambda b: b.timing.p50_ms if b.timing else 0.0, default=None)


def fastest_fp32(baselines: Sequence[Baseline]) -> Baseline | None:
    """The faster of fp32 eager and fp32 compile, as the speedup was reported before peers."""
    found = [b for b in baselines if b.kind in MODES and _timed(b)]
    return min(found, key=lambda b: b.timing.p50_ms if b.timing else 0.0, default=None)
