"""A search's budget: limits on candidates, wall clock, GPU time, LLM tokens and money.

`Budget` is the frozen setting; `BudgetTracker` adds up what the search used and says which
limit ran out first (`exhausted()`), so the search stops with a reason it can record.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, fields


class StopReason(enum.StrEnum):
    """Which budget ran out."""

    CANDIDATES = "candidates"
    WALL_CLOCK = "wall_clock"
    GPU_SECONDS = "gpu_seconds"
    LLM_TOKENS = "llm_tokens"
    MONEY = "money"


# StopReason -> (the Budget field that limits it, the Usage field that counts it)
_FIELDS = {
    StopReason.CANDIDATES: ("max_candidates", "candidates"),
    StopReason.WALL_CLOCK: ("wall_clock_s", "wall_clock_s"),
    StopReason.GPU_SECONDS: ("gpu_seconds", "gpu_seconds"),
    StopReason.LLM_TOKENS: ("llm_tokens", "llm_tokens"),
    StopReason.MONEY: ("money_usd", "money_usd"),
}


@dataclass(frozen=True)
class Budget:
    """Limits of one search; None means no limit on that resource, but one must be set."""

    max_candidates: int | None = None  # candidates evaluated
    wall_clock_s: float | None = None  # from the tracker's start
    gpu_seconds: float | None = None  # evaluation time on GPU platforms
    llm_tokens: int | None = None  # prompt + completion tokens
    money_usd: float | None = None  # LLM spend

    def __post_init__(self) -> None:
        limits = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, value in limits.items():
            if value is None:
                continue
            integral = name in ("max_candidates", "llm_tokens")
            kinds = (int,) if integral else (int, float)
            if isinstance(value, bool) or not isinstance(value, kinds) or not value > 0:
                kind = "an int" if integral else "a number"
                raise ValueError(f"{name}={value!r}: must be {kind} > 0, or None for no limit")
        if all(v is None for v in limits.values()):
            raise ValueError(
                "a budget needs at least one limit (e.g. Budget(max_candidates=100) or "
                "wall_clock_s=3600): a search without one would never stop"
            )

    def limit(self, reason: StopReason) -> float | None:
        return getattr(self, _FIELDS[reason][0])


@dataclass(frozen=True)
class Usage:
    """What a search has used so far."""

    candidates: int = 0
    wall_clock_s: float = 0.0
    gpu_seconds: float = 0.0
    llm_tokens: int = 0
    money_usd: float = 0.0

    def of(self, reason: StopReason) -> float:
        return getattr(self, _FIELDS[reason][1])


@dataclass(frozen=True)
class Exhausted:
    """The budget that ran out: how much was used of how much."""

    reason: StopReason
    used: float
    limit: float

    @property
    def message(self) -> str:
        field = _FIELDS[self.reason][0]
        return f"budget exhausted: {field} used {self.used:g} of {self.limit:g}"


class BudgetTracker:
    """Adds up usage against a `Budget`; the wall clock starts when the tracker is made."""

    def __init__(self, budget: Budget, clock: Callable[[], float] = time.monotonic):
        self.budget = budget
        self._clock = clock
        self._started = clock()
        self._candidates = 0
        self._gpu_seconds = 0.0
        self._tokens = 0
        self._money = 0.0

    @staticmethod
    def _check(name: str, value: float) -> None:
        if not value >= 0:
            raise ValueError(f"{name}={value!r}: usage only grows, pass a value >= 0")

    def add_candidates(self, n: int = 1) -> None:
        self._check("n", n)
        self._candidates += n

    def add_gpu_seconds(self, seconds: float) -> None:
        self._check("seconds", seconds)
        self._gpu_seconds += seconds

    def add_llm(self, tokens: int, cost_usd: float = 0.0) -> None:
        self._check("tokens", tokens)
        self._check("cost_usd", cost_usd)
        self._tokens += tokens
        self._money += cost_usd

    def usage(self) -> Usage:
        return Usage(
            self._candidates,
            self._clock() - self._started,
            self._gpu_seconds,
            self._tokens,
            self._money,
        )

    def exhausted(self) -> Exhausted | None:
        """The first limit reached, in `StopReason` order; None while all have room."""
        usage = self.usage()
        for reason in StopReason:
            limit = self.budget.limit(reason)
            if limit is not None and usage.of(reason) >= limit:
                return Exhausted(reason, usage.of(reason), limit)
        return None
