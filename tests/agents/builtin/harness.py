"""Check a generated candidate in this process, the way the evaluator does, but fast.

The candidate is imported (Triton under its interpreter, C++ builds in the shared cache),
built under the same seed as the reference, and run on inputs from both distributions
while the evaluator's own guards watch: the dispatch recorder (no torch compute) and the
launch counter. Outputs are compared under the strict policy. End-to-end runs through the
Evaluator live in test_evaluator.py.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kforge_search.evaluator import guards
from kforge_search.evaluator.build import cache_cpp_builds
from kforge_search.evaluator.policy import get_policy
from kforge_search.paths import cache_dir
from kforge_search.problem import Problem, exec_problem

COUNTER = guards.LaunchCounter()


@dataclass(frozen=True)
class Check:
    ok: bool
    message: str
    max_abs_err: float = 0.0
    launches: int = 0


def _seed(seed: int) -> None:
    torch.manual_seed(seed)


@contextlib.contextmanager
def interpreted() -> Iterator[None]:
    """TRITON_INTERPRET=1 while Triton functions are defined (they then run interpreted). The
    environment is restored afterwards (importing torch._dynamo also sets
    TORCHINDUCTOR_CACHE_DIR), so evaluator children started later do not inherit either."""
    saved = dict(os.environ)
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def interpreter_ready() -> bool:
    """Whether triton.language's own functions run interpreted in this process. Imports
    triton, and torch._dynamo (tracing imports it, and it imports more of triton), under
    TRITON_INTERPRET=1, so that later imports find them ready."""
    with interpreted():
        import torch._dynamo  # noqa: F401
        import triton.language as tl
        from triton.runtime.interpreter import InterpretedFunction

        with contextlib.suppress(ImportError):  # the interpreter imports it lazily
            import triton.experimental.gluon  # noqa: F401

        return isinstance(tl.cdiv, InterpretedFunction)


def load_candidate(source: str, path: Path) -> Any:
    path.write_text(source)
    name = f"kf_cand_{abs(hash(source))}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    with interpreted():
        spec.loader.exec_module(module)
    return module.ModelNew


def outputs_with_constants(
    source: str, problem: Problem, tmp: Path, shape: tuple[int, ...], **constants: Any
) -> tuple[Any, Any]:
    """(candidate, reference) outputs on one randn input of `shape`, the candidate module's
    `constants` set first (thresholds that small sizes never reach, lowered by a test), the
    candidate holding the reference's parameters."""
    model_new = load_candidate(source, tmp / "candidate.py")
    for name, value in constants.items():
        setattr(sys.modules[model_new.__module__], name, value)
    module = exec_problem(problem)
    init = module.get_init_inputs()
    _seed(0)
    reference = module.Model(*init)
    candidate = model_new(*init)
    candidate.load_state_dict(reference.state_dict())
    x = torch.randn(*shape)
    return candidate(x), reference(x)


def check(
    source: str, problem: Problem, tmp: Path, policy: str = "strict", trials: int = 3
) -> Check:
    """Verify a candidate's ModelNew against the problem's Model in this process."""
    cache_cpp_builds(cache_dir() / "torch_extensions", COUNTER.wrap_extension)
    counter = COUNTER
    module = exec_problem(problem)
    model_new = load_candidate(source, tmp / "candidate.py")
    init = module.get_init_inputs()
    _seed(2024)
    reference = module.Model(*init)
    _seed(2024)
    candidate = model_new(*init)
    worst, launches = 0.0, 0
    for trial in range(trials + 2):
        _seed(100 + trial)
        inputs = list(module.get_inputs())
        if trial >= trials:  # the second distribution, as the evaluator's extra trials
            inputs = [
                x * 4.0 + 0.5 if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                for x in inputs
            ]
        originals = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        # Reference and candidate run in separate processes in the evaluator, each from the
        # trial's seed: the candidate's forward starts from the generator's state as it was
        # before the reference's (random operators draw the same numbers).
        state = torch.get_rng_state()
        with torch.no_grad():
            expected = reference(*inputs)
            torch.set_rng_state(state)
            recorder = guards.OpRecorder()
            with _counting(counter), recorder:
                actual = candidate(*inputs)
        launches = counter.count
        if recorder.forbidden:
            return Check(False, f"torch compute in forward: {sorted(recorder.forbidden)}")
        if launches == 0:
            return Check(False, "no kernel launch")
        if any(
            isinstance(x, torch.Tensor) and not torch.equal(x, y)
            for x, y in zip(inputs, originals, strict=True)
        ):
            return Check(False, "input mutated")
        if type(actual) is not torch.Tensor or actual.shape != expected.shape:
            return Check(False, f"shape {getattr(actual, 'shape', None)} != {expected.shape}")
        if actual.dtype != expected.dtype:
            return Check(False, f"dtype {actual.dtype} != {expected.dtype}")
        # the policy's tolerance for the output's dtype (float16 / bfloat16: their own rows)
        atol, rtol = get_policy(policy).tolerance(str(expected.dtype).removeprefix("torch."))
        err = (actual.double() - expected.double()).abs()
        worst = max(worst, float(err.max()) if err.numel() else 0.0)
        if not torch.allclose(actual, expected, atol=atol, rtol=rtol):
            return Check(False, f"values differ in trial {trial}: max abs err {worst:.3g}", worst)
        theirs = dict(candidate.named_buffers())
        for name, buffer in reference.named_buffers():  # running statistics (training mode)
            tol = get_policy(policy).tolerance(str(buffer.dtype).removeprefix("torch."))
            if name not in theirs or not torch.allclose(
                theirs[name].double(), buffer.double(), atol=tol[0], rtol=tol[1]
            ):
                return Check(False, f"buffer {name} differs in trial {trial}")
    return Check(True, "ok", worst, launches)


class _counting:
    """Count Triton launches while active (calls into C++ modules are counted by the wrap
    that cache_cpp_builds puts on every load_inline module)."""

    def __init__(self, counter: guards.LaunchCounter):
        self.counter = counter
        self.saved: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> None:
        from triton.runtime import interpreter, jit

        self.counter.count = 0
        for owner, name in ((jit.JITFunction, "run"), (interpreter.InterpretedFunction, "run")):
            original = getattr(owner, name)
            self.saved.append((owner, name, original))
            setattr(owner, name, self.counter._counting(original))

    def __exit__(self, *exc: object) -> None:
        for owner, name, original in reversed(self.saved):
            setattr(owner, name, original)


def drafted(tmp_path: Path, forward: str, inputs: str, genome: Any) -> tuple[Any, Any]:
    """Our own program with this forward and these inputs (test_families_gpu.problem_source)
    and the builtin agent's draft of it for cpu-triton under `genome`: (problem, draft)."""
    from kforge_search.agents.builtin import BuiltinAgent
    from kforge_search.platforms import get_platform
    from kforge_search.problem import load_problem
    from tests.agents.builtin.test_families_gpu import problem_source

    path = tmp_path / "p.py"
    path.write_text(problem_source(forward, inputs))
    problem = load_problem(path)
    draft = BuiltinAgent().synthesize(problem, get_platform("cpu-triton"), genome, "test")
    assert not hasattr(draft, "message"), draft
    return problem, draft


def assert_draft_verifies(verify: Any, problem: Problem, platform: str, genome: Any) -> None:
    """The builtin agent's draft of `problem` for `platform` under `genome` is made (not
    refused) and verifies against the reference (`verify`: the conftest fixture)."""
    from kforge_search.agents.builtin import BuiltinAgent
    from kforge_search.platforms import get_platform

    draft = BuiltinAgent().synthesize(problem, get_platform(platform), genome, "test")
    assert not hasattr(draft, "message"), draft
    result = verify(draft.source, problem)
    assert result.ok, result.message
