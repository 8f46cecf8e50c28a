"""OpenAI Chat Completions, Anthropic Messages and OpenAI-compatible servers, async.

One retry layer only: the SDK's own (`max_retries`: 429, 5xx, timeouts, connection errors,
honouring Retry-After); what still fails becomes an `LLMError` with a kind, the last HTTP
status and the requests sent. Each call is timed (all its attempts), its requests counted (a
hook on the SDK's HTTP client), its tokens counted from the reply's usage and priced; a reply
cut at the output limit says so (`Reply.truncated`). With a `ReplyCache`, a request seen
before is answered from disk. Keys are read from the environment when the client is made and
passed to the SDK only.
"""

from __future__ import annotations

import base64
import contextvars
import os
import time
from collections.abc import Sequence
from typing import Any, Protocol

from kforge_search.llm.cache import ReplyCache
from kforge_search.llm.config import LLMConfig, LLMError, Message, Reply, prompt_hash
from kforge_search.llm.prices import PriceTable
from kforge_search.llm.vision import accepts_images

_Answer = tuple[str, str, int, int, bool]


class Provider(Protocol):
    config: LLMConfig

    async def complete(self, system: str, messages: Sequence[Message]) -> Reply: ...


def _key(config: LLMConfig) -> str:
    env = config.key_env
    key = os.environ.get(env, "") if env else ""
    if key:
        return key
    if config.provider == "compatible":
        return "not-needed"  # local servers (vLLM, SGLang, Ollama) usually take any key
    raise LLMError(
        "auth", f"no API key: set {env} in the environment (keys are never read from files)"
    )


def _error(exc: Exception, attempts: int) -> LLMError:
    """An SDK exception as an LLMError; its text is the SDK's, which carries no key."""
    name = type(exc).__name__
    status = getattr(exc, "status_code", None)
    code = status if isinstance(status, int) else 0
    if "Timeout" in name:
        kind, text = "timeout", f"the request timed out (after the SDK's retries): {exc}"
    elif status == 429 or "RateLimit" in name:
        kind, text = "rate_limit", f"rate limited (429) after the SDK's retries: {exc}"
    elif status in (401, 403) or "Authentication" in name or "PermissionDenied" in name:
        kind, text = "auth", f"the provider refused the key ({status})"
    elif code >= 500:
        kind, text = "server", f"server error {status} after the SDK's retries: {exc}"
    elif code:
        kind, text = "bad_request", f"the provider rejected the request ({status}): {exc}"
    elif "Connection" in name:
        kind, text = "connection", f"cannot reach the provider: {exc}"
    elif "Validation" in name or isinstance(exc, ValueError | KeyError | TypeError):
        kind, text = "malformed", f"the reply could not be read ({name}): {exc}"
    else:
        kind, text = "server", f"{name}: {exc}"
    return LLMError(kind, text, code, attempts)


# requests sent by the call running in this task: the HTTP client's hook counts them
_attempts: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "kforge_llm_attempts", default=None
)


async def _count_request(request: Any) -> None:
    box = _attempts.get()
    if box is not None:
        box[0] += 1


class _Base:
    def __init__(self, config: LLMConfig, prices: PriceTable | None = None,
                 cache: ReplyCache | None = None):  # fmt: skip
        self.config = config
        self.prices = prices or PriceTable.load(config.prices_file or None)
        self.cache = cache
        self.images = accepts_images(config)
        sdk, http = self._sdk()
        self.client = sdk(  # the key goes to the SDK client and nowhere else
            api_key=_key(config),
            base_url=config.base_url,
            timeout=config.timeout_s,
            max_retries=config.max_retries,
            http_client=http(event_hooks={"request": [_count_request]}),
        )

    @staticmethod
    def _sdk() -> tuple[Any, Any]:
        """The SDK's async client class and its default async HTTP client class."""
        raise NotImplementedError

    async def complete(self, system: str, messages: Sequence[Message]) -> Reply:
        msgs = tuple(messages)
        if not self.images:  # a text-only model never gets image parts
            msgs = tuple(Message(m.role, m.text) for m in msgs)
        key = prompt_hash(self.config, system, msgs)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            return hit
        started = time.monotonic()
        box = [0]
        _attempts.set(box)  # this task's context: the hook adds each request sent
        try:
            text, model, tokens_in, tokens_out, truncated = await self._call(system, msgs)
        except LLMError as exc:
            exc.attempts, exc.latency_s = box[0], time.monotonic() - started
            raise
        except Exception as exc:  # the SDK's errors, after its own retries
            error = _error(exc, box[0])
            error.latency_s = time.monotonic() - started
            raise error from None
        if not text.strip() and not truncated:
            spent = time.monotonic() - started
            raise LLMError("empty", "the model returned an empty reply", 0, box[0], spent)
        reply = Reply(
            text=text,
            model=model or self.config.model,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=self.prices.cost(model or self.config.model, tokens_in, tokens_out),
            latency_s=time.monotonic() - started,
            prompt_hash=key,
            truncated=truncated,
            attempts=box[0],
        )
        if self.cache is not None:
            self.cache.put(reply)
        return reply

    async def _call(self, system: str, messages: tuple[Message, ...]) -> _Answer:
        """(text, model, tokens in, tokens out, cut at the output limit)"""
        raise NotImplementedError


def _png(data: bytes) -> str:
    return base64.b64encode(data).decode()


class OpenAIProvider(_Base):
    """OpenAI Chat Completions, and any server that speaks it (base_url)."""

    @staticmethod
    def _sdk() -> tuple[Any, Any]:
        import openai

        return openai.AsyncOpenAI, openai.DefaultAsyncHttpxClient

    async def _call(self, system: str, messages: tuple[Message, ...]) -> _Answer:
        wire: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        for m in messages:
            if m.images:
                parts: list[dict[str, Any]] = [{"type": "text", "text": m.text}]
                parts += [
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{_png(i)}"}}
                    for i in m.images
                ]
                wire.append({"role": m.role, "content": parts})
            else:
                wire.append({"role": m.role, "content": m.text})
        out = await self.client.chat.completions.create(
            model=self.config.model,
            messages=wire,  # type: ignore[arg-type]
            max_tokens=self.config.max_tokens,
            temperature=self.config.temperature,
        )
        if not out.choices:
            raise LLMError("empty", "the reply has no choices")
        usage = out.usage
        choice = out.choices[0]
        return (
            choice.message.content or "",
            out.model,
            usage.prompt_tokens if usage else 0,
            usage.completion_tokens if usage else 0,
            choice.finish_reason == "length",
        )


class AnthropicProvider(_Base):
    """Anthropic Messages."""

    @staticmethod
    def _sdk() -> tuple[Any, Any]:
        import anthropic

        return anthropic.AsyncAnthropic, anthropic.DefaultAsyncHttpxClient

    async def _call(self, system: str, messages: tuple[Message, ...]) -> _Answer:
        wire: list[dict[str, Any]] = []
        for m in messages:
            blocks: list[dict[str, Any]] = [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": _png(i)},
                }
                for i in m.images
            ]
            blocks.append({"type": "text", "text": m.text})
            wire.append({"role": m.role, "content": blocks})
        kwargs: dict[str, Any] = {"system": system} if system else {}
        out = await self.client.messages.create(
            model=self.config.model,
            messages=wire,  # type: ignore[arg-type]
            max_tokens=self.config.max_tokens,
            **kwargs,  # no temperature: recent Messages SDKs and models take none
        )
        text = "".join(getattr(b, "text", "") for b in out.content if b.type == "text")
        usage = out.usage
        cut = out.stop_reason == "max_tokens"
        return text, out.model, usage.input_tokens, usage.output_tokens, cut


def make_provider(config: LLMConfig, prices: PriceTable | None = None,
                  cache: ReplyCache | None = None) -> Provider:  # fmt: skip
    if config.provider == "anthropic":
        return AnthropicProvider(config, prices, cache)
    return OpenAIProvider(config, prices, cache)
