"""How an evaluator's child ends a job it cannot finish: CandidateFailure (a status, a
message, fields for the parent), raised anywhere in the child and reported by worker.main.

Its own module: the child runs worker.py as __main__, and reference_child.py (imported by
it) would otherwise raise a second copy's class that worker.main does not catch.
"""

from __future__ import annotations

from typing import Any


class CandidateFailure(Exception):
    def __init__(self, status: str, message: str, **fields: Any):
        super().__init__(message)
        self.status = status
        self.fields = fields


def rejected(reason: str, message: str) -> CandidateFailure:
    return CandidateFailure("REJECTED", f"{message} [{reason}]", reasons=[reason])
