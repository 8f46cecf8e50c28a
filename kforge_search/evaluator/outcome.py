"""How an evaluator child's events and its end become an EvalResult: failures, mismatches,
cheating seen in the timed runs, and a candidate that does not generalize."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kforge_search.evaluator.result import Artifacts, EvalResult, Status, TimingStats
from kforge_search.evaluator.sandbox import Child, ChildExit


def not_general(result: EvalResult, sizes: dict[str, Any], why: str, child: Child) -> EvalResult:
    """Verified and timed, but wrong (or failing) at the problem's unseen sizes."""
    where = ", ".join(f"{k}={v}" for k, v in sizes.items())
    return replace(
        result,
        generalizes="no",
        warnings=(*result.warnings, f"at the unseen sizes ({where}): {why}"),
        artifacts=Artifacts(output_tail=output_tail(child)),
    )


def with_child_warning(result: EvalResult, event: dict[str, Any]) -> EvalResult:
    """A "warning" event of the candidate's child (it ran without its file-system sandbox:
    landlock.py), carried by `result` and every result built from it."""
    return replace(result, warnings=(*result.warnings, str(event.get("message", ""))))


def timing_problem(timing: TimingStats, stale: str) -> tuple[str, str] | None:
    """Cheating seen in the timed runs: stale outputs, or work the CUDA events did not see."""
    if stale:
        return (
            "timing:stale-output",
            f"outputs of the timed runs (fresh inputs each run) are wrong: {stale}. "
            "Compute every call's result; do not cache or skip work",
        )
    hidden = timing.host_p50_ms - timing.p50_ms
    if timing.method == "cuda_events" and hidden > max(0.5 * timing.host_p50_ms, 0.1):
        return (
            "timing:hidden-work",
            f"a run takes {timing.host_p50_ms:.3f} ms of wall clock but only "
            f"{timing.p50_ms:.3f} ms on the timed stream: work runs where the timing "
            "cannot see it (another stream?). Launch on the current stream",
        )
    return None


def output_tail(child: Child) -> str:
    return child.exit.output if child.exit else ""


def describe_exit(exit: ChildExit) -> str:
    if exit.killed == "timeout":
        return f"killed: it exceeded the time limit of the {exit.stage} stage"
    if exit.killed == "memory":
        return f"killed: it exceeded the memory limit in the {exit.stage} stage"
    if exit.killed == "output":
        return f"killed: it printed more than the output limit ({exit.output_bytes} bytes)"
    if exit.signal_name:
        return f"it died with {exit.signal_name} in the {exit.stage} stage"
    return f"it exited with code {exit.returncode} in the {exit.stage} stage"


def failure_result(
    base: EvalResult, event: dict[str, Any], stage: str, exit: ChildExit | None
) -> EvalResult:
    status = Status(event["status"])
    hint = {
        Status.COMPILE_ERROR: "Fix the build error (see the compiler log) and try again.",
        Status.RUNTIME_ERROR: "Fix the error raised while running forward (see the traceback).",
        Status.REJECTED: "Change the kernel so that it does its work honestly.",
    }.get(status, "")
    return replace(
        base,
        status=status,
        stage=stage,
        message=f"{event['message']}\n{hint}".strip(),
        artifacts=Artifacts(
            compile_log=event.get("compile_log", ""),
            traceback=event.get("traceback", ""),
            output_tail=exit.output if exit else "",
            reasons=tuple(event.get("reasons", ())),
        ),
    )


def last_exception(output: str) -> str:
    """The last line of the last traceback in a child's output ("" where it printed none):
    an exception that escaped the harness's handlers (torch.OutOfMemoryError while its
    outputs are saved, say) is not the candidate exiting on purpose."""
    start = output.rfind("Traceback (most recent call last):")
    if start < 0:
        return ""
    lines = [line for line in output[start:].splitlines()[1:] if line and not line[0].isspace()]
    return lines[0][:300] if lines else ""


def exit_result(base: EvalResult, exit: ChildExit, correctness: Any) -> EvalResult:
    """The child ended without a result: classify by how it ended."""
    describe = describe_exit(exit)
    if exit.killed == "timeout":
        status, hint = Status.TIMEOUT, "Look for an infinite loop or a kernel that never ends."
    elif exit.killed in {"memory", "output"}:
        status, hint = Status.RUNTIME_ERROR, "Allocate less memory and print less."
    elif exit.stage in {"start", "setup"}:
        status, hint = (
            Status.INFRA_ERROR,
            "The evaluator's process failed before the candidate ran.",
        )
    elif exit.signal_name:
        status = Status.RUNTIME_ERROR
        hint = "A crash in native code: check indices and bounds (out-of-bounds access?)."
    elif raised := last_exception(exit.output):
        status, hint = Status.RUNTIME_ERROR, f"It raised {raised} (the traceback is in its output)."
    else:
        status, hint = Status.RUNTIME_ERROR, "Do not exit the process from the candidate."
    return replace(
        base,
        status=status,
        stage=exit.stage,
        message=f"the candidate's process ended without a result: {describe}. {hint}",
        correctness=correctness,
        artifacts=Artifacts(output_tail=exit.output),
    )


def buffer_message(m: Any) -> str:
    """A buffer the reference's forward changed (training mode: BatchNorm's running
    statistics) that the candidate lacks or left at another value."""
    why = (
        "The model runs as constructed, in training mode: a forward that updates buffers "
        "(BatchNorm: running_mean, running_var, num_batches_tracked) must update them as the "
        "reference does; they are compared like outputs."
    )
    if m.reason == "missing":
        return (
            f"ModelNew has no buffer `{m.buffer}`, which the reference's forward changes in "
            f"trial {m.trial}: create modules and buffers as Model does. {why}"
        )
    if m.reason in {"shape", "dtype"}:
        detail = f"wrong {m.reason}: expected {m.expected}, got {m.actual}"
    else:
        where = ", ".join(str(i) for i in m.indices)
        detail = (
            f"{m.n_mismatched} of {m.n_total} elements differ; first at {where}: expected "
            f"{m.expected}, got {m.actual}"
        )
    return f"buffer `{m.buffer}` after the forward of trial {m.trial}: {detail}. {why}"


def mismatch_message(m: Any, c: Any) -> str:
    if m.buffer:
        return buffer_message(m)
    if m.reason in {"shape", "dtype", "count", "type"}:
        return (
            f"wrong {m.reason} of output {m.output_index} in trial {m.trial}: expected "
            f"{m.expected}, got {m.actual}. Return outputs exactly as the reference does."
        )
    where = ", ".join(str(i) for i in m.indices)
    what = "non-finite values (NaN/inf)" if m.reason == "nonfinite" else "values"
    return (
        f"output {m.output_index} has wrong {what} in trial {m.trial}: {m.n_mismatched} of "
        f"{m.n_total} elements are outside atol={c.atol:g}, rtol={c.rtol:g} "
        f"(max abs err {c.max_abs_err:.3g}, max rel err {c.max_rel_err:.3g}). First mismatches "
        f"at {where}: expected {m.expected}, got {m.actual}. "
        f"{c.trials_passed}/{c.trials_run} trials passed."
    )


def gist(exc: BaseException, limit: int = 600) -> str:
    """An error's first line and, of a traceback, its last: one line, at most `limit`."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return " ... ".join(dict.fromkeys([lines[0], lines[-1]]))[:limit] if lines else ""
