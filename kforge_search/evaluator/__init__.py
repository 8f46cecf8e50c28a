"""The staged evaluator: static_check -> build -> verify -> time -> profile (when asked)."""

from kforge_search.evaluator.config import EvalConfig
from kforge_search.evaluator.pipeline import Evaluator
from kforge_search.evaluator.result import EvalResult, Status

__all__ = ["EvalConfig", "EvalResult", "Evaluator", "Status"]
