"""An evaluator as a Ray actor: a thin shell over `kforge_search.evaluator.Evaluator`.

One actor evaluates one candidate at a time (each in killable child processes, as the
evaluator always does) and keeps the evaluator's in-memory reference outputs between calls.
It is not restarted by Ray and Ray does not retry its calls: `EvaluatorPool` owns the one
retry, so a candidate that kills its evaluator is retried once, not forever.
"""

from __future__ import annotations

import contextlib
import os

import ray

from kforge_search.evaluator import EvalConfig, EvalResult, Evaluator
from kforge_search.evaluator.devicelock import device_key
from kforge_search.platforms import get_platform
from kforge_search.problem import Problem, ProblemError


@ray.remote(max_restarts=0, max_task_retries=0)
class EvaluatorActor:
    """Evaluates candidate sources on this node's device."""

    def __init__(self, config: EvalConfig | None = None):
        self._evaluator = Evaluator(config)

    def ping(self) -> int:
        """The actor's process id, once it is up."""
        return os.getpid()

    def lane(self, device_kind: str) -> str:
        """Where this actor times: "<node ip>/<node id>/<device lock key>", e.g.
        "10.0.0.5/3f2a9c1b/cuda-3" for GPU 3 of that node (Ray pins the actor to one GPU and
        the evaluator's device lock is that GPU's: its timing lane)."""
        context = ray.get_runtime_context()
        ip = ray.util.get_node_ip_address()
        return f"{ip}/{context.get_node_id()[:8]}/{device_key(device_kind)}"

    def unavailable(self, platform_name: str) -> str:
        """Why the platform cannot run on this actor's node ("" when it can)."""
        from kforge_search.platforms import availability

        state = availability(get_platform(platform_name))
        return "" if state.ok else state.reason

    def evaluate(
        self,
        source: str,
        problem: Problem,
        platform_name: str,
        unseen_below_ms: float | None = None,
    ) -> EvalResult:
        return self._evaluator.evaluate_source(
            source, problem, get_platform(platform_name), unseen_below_ms=unseen_below_ms
        )

    def check_reference(self, problem: Problem, platform_name: str) -> str:
        """Run the problem's reference here (and at its unseen sizes, when candidates are
        verified there too), then its baselines: "" when it runs (its outputs kept for the
        candidates, the baselines cached for every evaluator of the node), else why not (it
        raised or exceeded a limit of the evaluator)."""
        platform = get_platform(platform_name)
        wanted = [problem]
        unseen = "unseen" in dict(problem.size_sets) and problem.size_set != "unseen"
        if unseen and self._evaluator.config.check_unseen:  # as Evaluator._unseen decides
            wanted.append(problem.resized("unseen"))
        try:
            refs = [self._evaluator.reference(one, platform) for one in wanted]
        except ProblemError as exc:
            return str(exc)
        # its baselines too, before any candidate: measured in a search, a problem's
        # torch.compile baselines compiled for minutes under the device lock's shared hold,
        # and every actor's timing waited (H100, 8 actors: a candidate's timing 255 s)
        with contextlib.suppress(Exception):  # not the problem's: a search measures them later
            self._evaluator.baselines(problem, platform, refs[0])
        return ""
