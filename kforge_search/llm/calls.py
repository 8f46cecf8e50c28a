"""Every LLM call as a result: `LLMCall` (status, attempts, latency, tokens, cost, why it
failed) and the journal that gathers the calls of one proposal.

A lineage opens `recording()` around its agent's `propose`; the agents `note` each call
they make (the writer's, the analyst's, a shorter-reply request), ok or not, in the thread
that asked. The lineage hands them on with its step: the search charges them to the budget,
the store keeps them in `llm_calls` and the console says why a lineage got no draft.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass

from kforge_search.llm.config import LLMError, Reply

# ok: a usable reply; http_error: an HTTP error status after the SDK's retries (http_status
# says which); timeout; refused: the provider could not be reached; truncated: the reply was
# cut at the output limit; unparsable: a reply without what was asked (no module, no JSON, a
# malformed or empty body); no_key: no API key in the environment
CALL_STATUSES = ("ok", "http_error", "timeout", "refused", "truncated", "unparsable", "no_key")
_BY_KIND = {
    "timeout": "timeout",
    "connection": "refused",
    "rate_limit": "http_error",
    "server": "http_error",
    "bad_request": "http_error",
    "empty": "unparsable",
    "malformed": "unparsable",
}


def error_status(exc: LLMError) -> str:
    """The call status of a failed call."""
    if exc.kind == "auth":
        return "http_error" if exc.http_status else "no_key"
    return _BY_KIND.get(exc.kind, "http_error" if exc.http_status else "refused")


@dataclass(frozen=True)
class LLMCall:
    role: str  # "writer" (the generation agent) or "analyst"
    model: str
    status: str  # one of CALL_STATUSES
    attempts: int = 1  # requests sent, the SDK's retries included (0: none could be sent)
    latency_s: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    cached: bool = False
    http_status: int = 0  # the last HTTP error status (0: none)
    error: str = ""  # why it failed, for the console, the store and the next step
    subject: str = ""  # the source the call wrote (writer) or analyzed (analyst)

    def __post_init__(self) -> None:
        if self.status not in CALL_STATUSES:
            raise ValueError(f"call status {self.status!r}: use one of {CALL_STATUSES}")
        if self.status != "ok" and not self.error:
            raise ValueError(f"a {self.status} call needs the reason it failed")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def summary(self) -> str:
        """e.g. 'http_error 503 after 3 attempts: server error 503 ...'"""
        if self.ok:
            return f"ok ({self.tokens_out} tokens out, {self.latency_s:.1f} s)"
        code = f" {self.http_status}" if self.http_status else ""
        tries = f" after {self.attempts} attempt{'s' if self.attempts != 1 else ''}"
        return f"{self.status}{code}{tries if self.attempts else ''}: {self.error}"

    @classmethod
    def of_reply(
        cls, role: str, reply: Reply, status: str = "ok", error: str = "", subject: str = ""
    ) -> LLMCall:
        return cls(
            role,
            reply.model,
            status,
            reply.attempts,
            reply.latency_s,
            reply.tokens_in,
            reply.tokens_out,
            reply.cost_usd,
            reply.cached,
            error=error,
            subject=subject,
        )

    @classmethod
    def of_error(cls, role: str, model: str, exc: LLMError, subject: str = "") -> LLMCall:
        return cls(
            role,
            model,
            error_status(exc),
            exc.attempts,
            exc.latency_s,
            http_status=exc.http_status,
            error=str(exc),
            subject=subject,
        )


_journal: contextvars.ContextVar[list[LLMCall] | None] = contextvars.ContextVar(
    "kforge_llm_calls", default=None
)


@contextlib.contextmanager
def recording() -> Iterator[list[LLMCall]]:
    """The calls noted in this thread while the block runs (nested blocks see their own)."""
    calls: list[LLMCall] = []
    token = _journal.set(calls)
    try:
        yield calls
    finally:
        _journal.reset(token)


def note(call: LLMCall) -> None:
    """Add a call to the open journal (none open: the call is not recorded anywhere)."""
    calls = _journal.get()
    if calls is not None:
        calls.append(call)
