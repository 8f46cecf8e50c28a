"""Dollars per call from a price table: USD per million input and output tokens by model.

The built-in table is a starting point (list prices seen in 2026; check yours); a JSON file
named by $KFORGE_PRICES ({"model-prefix": [input_per_mtok, output_per_mtok], ...}) replaces
entries. The longest matching prefix of the model name wins; an unknown model costs 0 and
`known` says so, so budgets in money never silently pass on a model we cannot price.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5": (1.25, 10.00),
    "o3": (2.00, 8.00),
    "o4-mini": (1.10, 4.40),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-haiku-4": (1.00, 5.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-opus-4": (15.00, 75.00),
}


@dataclass(frozen=True)
class PriceTable:
    per_mtok: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT))

    @classmethod
    def load(cls, path: str | Path | None = None) -> PriceTable:
        """The default table, with the entries of `path` (or $KFORGE_PRICES) on top."""
        table = dict(DEFAULT)
        source = path or os.environ.get("KFORGE_PRICES")
        if source:
            try:
                extra = json.loads(Path(source).read_text())
                table.update({k: (float(v[0]), float(v[1])) for k, v in extra.items()})
            except (OSError, ValueError, TypeError, IndexError) as exc:
                raise ValueError(
                    f"price table {source}: {exc}; write JSON like "
                    '{"my-model": [0.5, 1.5]} (USD per million input, output tokens)'
                ) from exc
        return cls(table)

    def _entry(self, model: str) -> tuple[float, float] | None:
        matches = [k for k in self.per_mtok if model.startswith(k)]
        return self.per_mtok[max(matches, key=len)] if matches else None

    def known(self, model: str) -> bool:
        return self._entry(model) is not None

    def cost(self, model: str, tokens_in: int, tokens_out: int) -> float:
        entry = self._entry(model)
        if entry is None:
            return 0.0
        return (tokens_in * entry[0] + tokens_out * entry[1]) / 1e6
