"""What a provider is asked (messages), how (LLMConfig) and what it answers (Reply)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

PROVIDERS = ("openai", "anthropic", "compatible")
KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "compatible": ""}


class LLMError(RuntimeError):
    """A call that failed after the SDK's own retries. `kind`: timeout, rate_limit, server,
    auth, bad_request, connection, empty, malformed; `http_status` the last HTTP status (0:
    none came), `attempts` the requests sent, `latency_s` the time they took. The message
    never contains an API key."""

    def __init__(self, kind: str, message: str, http_status: int = 0, attempts: int = 0,
                 latency_s: float = 0.0):  # fmt: skip
        super().__init__(message)
        self.kind = kind
        self.http_status = http_status
        self.attempts = attempts
        self.latency_s = latency_s  # the seconds spent on it, every attempt

    def __reduce__(self) -> tuple[type, tuple[str, str, int, int, float]]:
        args = (self.kind, str(self), self.http_status, self.attempts, self.latency_s)
        return (LLMError, args)


@dataclass(frozen=True)
class LLMConfig:
    provider: str  # openai, anthropic, or compatible (an OpenAI-compatible server)
    model: str
    base_url: str | None = None  # vLLM, SGLang, Ollama: e.g. http://localhost:8000/v1
    api_key_env: str = ""  # the environment variable holding the key ("": the provider's)
    timeout_s: float = 120.0  # per request (each attempt)
    max_retries: int = 2  # the SDK's retries (429, 5xx, timeouts, connection errors)
    max_tokens: int = 16384  # of output: a long kernel module fits
    temperature: float = 0.2  # Chat Completions only (Anthropic's Messages takes none)
    images: bool | None = None  # does the model take images? None: vision.accepts_images
    prices_file: str = ""  # a JSON price table over the built-in one (or $KFORGE_PRICES)

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise ValueError(f"provider {self.provider!r}: use one of {PROVIDERS}")
        if not self.model:
            raise ValueError("an LLM config needs a model name")
        if self.provider == "compatible" and not self.base_url:
            raise ValueError("provider compatible needs --base-url (e.g. http://localhost:8000/v1)")
        if self.timeout_s <= 0 or self.max_retries < 0 or self.max_tokens < 1:
            raise ValueError(
                f"timeout_s={self.timeout_s}, max_retries={self.max_retries}, "
                f"max_tokens={self.max_tokens}: need > 0, >= 0, >= 1"
            )

    @property
    def key_env(self) -> str:
        return self.api_key_env or KEY_ENV[self.provider]


@dataclass(frozen=True)
class Message:
    role: str  # "user" or "assistant"
    text: str
    images: tuple[bytes, ...] = field(default=(), repr=False)  # PNG bytes

    def __post_init__(self) -> None:
        if self.role not in ("user", "assistant"):
            raise ValueError(f"role {self.role!r}: use user or assistant (system goes apart)")


@dataclass(frozen=True)
class Reply:
    text: str
    model: str
    tokens_in: int
    tokens_out: int
    cost_usd: float
    latency_s: float
    prompt_hash: str
    cached: bool = False
    truncated: bool = False  # cut at max_tokens (finish_reason length / stop_reason max_tokens)
    attempts: int = 1  # requests sent, the SDK's retries included


def prompt_hash(config: LLMConfig, system: str, messages: tuple[Message, ...]) -> str:
    """What identifies a request for the cache: provider, model, endpoint, sampling, text and
    images (never the key)."""
    data = {
        "provider": config.provider,
        "model": config.model,
        "base_url": config.base_url or "",
        "max_tokens": config.max_tokens,
        "temperature": config.temperature,
        "system": system,
        "messages": [
            [m.role, m.text, [hashlib.sha256(i).hexdigest() for i in m.images]] for m in messages
        ],
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:32]
