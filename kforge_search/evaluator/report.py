"""A plain-text report of an EvalResult that a person or an LLM can act on."""

from __future__ import annotations

from kforge_search.evaluator.peers import refusal
from kforge_search.evaluator.result import Baseline, EvalResult, PeerCheck, TimingStats

_LOG_CHARS = 6000


def _timing(t: TimingStats) -> str:
    note = "" if t.meaningful else "  (interpreter: not a meaningful time)"
    return (
        f"p20 {t.p20_ms:.4f} ms | p50 {t.p50_ms:.4f} ms | p80 {t.p80_ms:.4f} ms "
        f"({t.runs} runs, {t.method}){note}"
    )


def _clip(text: str, chars: int = _LOG_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= chars else f"[... {len(text) - chars} chars ...]\n{text[-chars:]}"


def _errors(check: PeerCheck) -> str:
    return f"max abs err {check.max_abs_err:.3g}, max rel err {check.max_rel_err:.3g}"


def _check(b: Baseline, policy: str) -> str:
    """What the kind's outputs did under the policy, at the problem's sizes and at its
    unseen sizes, and why it is no peer there (evaluator/peers.py)."""
    if b.kind == "eager":
        return "the reference itself"
    check = b.check(policy)
    if check is None:
        return b.note or refusal(b, policy) or "not checked"
    if not check.passed:
        return f"fails {policy}: {check.mismatch} ({_errors(check)}): no peer"
    said = f"passes {policy} ({_errors(check)})"
    unseen = b.check(policy, unseen=True)
    if unseen is not None and unseen.passed:
        return f"{said}, and at the unseen sizes ({_errors(unseen)})"
    if unseen is not None:
        return (
            f"{said}, but fails {policy} at the unseen sizes: {unseen.mismatch} "
            f"({_errors(unseen)}): no peer"
        )
    why = refusal(b, policy)
    return f"{said}, but {why}" if why else said


def _peer(r: EvalResult) -> str:
    """The speedup of record, its peer, and the fp32 figure beside it."""
    peer, record, fp32 = r.peer(), r.speedup_of_record, r.speedup_fp32
    if peer is None or record is None:
        return ""
    line = f"{record:.2f}x over {peer.kind} (the fastest PyTorch setting that passes {r.policy})"
    if fp32 is not None:
        line += f"; fp32 only (the faster of eager and compile): {fp32:.2f}x"
    return line


def format_report(r: EvalResult) -> str:
    sizes = ", ".join(f"{k}={v}" for k, v in r.sizes)
    lines = [
        f"status:    {r.status.value}  (stage: {r.stage})",
        f"problem:   {r.problem_name} [{r.problem_id}]  sizes: {sizes or 'default'}",
        f"platform:  {r.platform} on {r.device_name or '?'}  torch {r.torch_version or '?'}",
        f"policy:    {r.policy}  (atol={r.correctness.atol:g}, rtol={r.correctness.rtol:g}"
        + (f" for {r.correctness.dtype})" if r.correctness.dtype else ")"),
        f"message:   {r.message}",
    ]
    if r.artifacts.reasons:
        lines.append(f"reasons:   {', '.join(r.artifacts.reasons)}")
    c = r.correctness
    if c.trials_run:
        lines.append(
            f"verify:    {c.trials_passed}/{c.trials_run} trials passed, max abs err "
            f"{c.max_abs_err:.3g}, max rel err {c.max_rel_err:.3g}"
            + (
                f"; {c.by_float64} elements within tolerance of the float64 result only"
                if c.by_float64
                else ""
            )
        )
    if r.generalizes != "unchecked":
        lines.append(f"unseen:    generalizes to the problem's unseen sizes: {r.generalizes}")
    if r.timing:
        lines.append(f"time:      {_timing(r.timing)}")
    for b in r.baselines:
        if b.ok and b.timing:
            speedup = r.speedup(b.kind)
            ratio = f"  -> speedup {speedup:.2f}x" if speedup else ""
            cached = " (cached)" if b.cached else ""
            lines.append(f"{b.kind + ':':<10} {_timing(b.timing)}{cached}{ratio}")
            lines.append(f"{'':<10} {_check(b, r.policy)}")
        else:
            lines.append(f"{b.kind + ':':<10} not timed: {b.error}")
    if peer := _peer(r):
        lines.append(f"peer:      {peer}")
    lines.extend(f"warning:   {w}" for w in r.warnings)
    for title, text in (
        ("compiler log", r.artifacts.compile_log),
        ("traceback", r.artifacts.traceback),
        ("candidate output", r.artifacts.output_tail),
    ):
        if text.strip():
            lines.append(f"--- {title} ---\n{_clip(text)}")
    return "\n".join(lines)
