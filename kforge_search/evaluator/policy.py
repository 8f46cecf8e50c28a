"""Numeric policies: one tolerance table keyed by dtype, stored with every result."""

from __future__ import annotations

from dataclasses import dataclass

# (atol, rtol) per output dtype name.
_STRICT = {"float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2)}
_LOOSE = {"float32": (1e-2, 1e-2), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


@dataclass(frozen=True)
class NumericPolicy:
    name: str
    table: tuple[tuple[str, float, float], ...]

    def tolerance(self, dtype_name: str) -> tuple[float, float]:
        """(atol, rtol) for an output dtype such as "float32"; integers and bools are exact."""
        for name, atol, rtol in self.table:
            if name == dtype_name:
                return atol, rtol
        if dtype_name.startswith("float") or dtype_name.startswith("complex"):
            return self.tolerance("float32")
        return 0.0, 0.0


def _policy(name: str, table: dict[str, tuple[float, float]]) -> NumericPolicy:
    return NumericPolicy(name, tuple((k, a, r) for k, (a, r) in table.items()))


POLICIES = {
    "strict": _policy("strict", _STRICT),  # as current KernelBench: 1e-4 for fp32 (default)
    "loose": _policy("loose", _LOOSE),  # as KernelBench v0.1 and the KForge paper: 1e-2
}


def get_policy(name: str) -> NumericPolicy:
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(
            f"unknown numeric policy {name!r}: use one of {', '.join(POLICIES)}"
        ) from None
