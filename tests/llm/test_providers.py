"""Providers through the real openai and anthropic SDK clients, against a local server that
speaks their wire protocols with scripted replies."""

from __future__ import annotations

import asyncio
import socket

import pytest

from kforge_search.llm.cache import ReplyCache
from kforge_search.llm.calls import LLMCall
from kforge_search.llm.config import LLMConfig, LLMError, Message
from kforge_search.llm.prices import PriceTable
from kforge_search.llm.providers import make_provider
from kforge_search.llm.vision import accepts_images
from tests.llm.server import Raw, Say, ScriptedLLM, Slow, Status

pytestmark = pytest.mark.llm

REPLY = (
    "The epilogue can be fused into the GEMM.\n\n```python\nclass ModelNew:\n    pass\n```\n"
    "That removes one pass over the output."
)
PNG = b"\x89PNG\r\n\x1a\n fake image bytes"
PRICES = PriceTable({"gpt-4o": (2.5, 10.0), "claude-sonnet-5": (3.0, 15.0)})


@pytest.fixture(autouse=True)
def _keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-secret")


def _config(server: ScriptedLLM, provider: str, model: str, **kw) -> LLMConfig:
    base = f"{server.url}/v1" if provider != "anthropic" else server.url
    return LLMConfig(provider, model, base_url=base, **kw)


def _ask(provider, text="write the kernel", images=()):
    return asyncio.run(provider.complete("You write kernels.", [Message("user", text, images)]))


@pytest.mark.parametrize(
    ("provider", "model"), [("openai", "gpt-4o"), ("anthropic", "claude-sonnet-5-5")]
)
def test_a_reply_with_its_tokens_cost_and_the_request_as_sent(provider, model):
    with ScriptedLLM(Say(REPLY, 1200, 300)) as server:
        reply = _ask(make_provider(_config(server, provider, model), PRICES), images=(PNG,))
    assert reply.text == REPLY and (reply.tokens_in, reply.tokens_out) == (1200, 300)
    per_mtok = PRICES.per_mtok["gpt-4o" if provider == "openai" else "claude-sonnet-5"]
    assert reply.cost_usd == pytest.approx((1200 * per_mtok[0] + 300 * per_mtok[1]) / 1e6)
    assert reply.latency_s > 0 and not reply.cached
    (seen,) = server.seen
    assert seen.key.endswith("secret")  # the key went to the server, in its header only
    body = str(seen.body)
    assert "You write kernels." in body and "write the kernel" in body
    assert ("image_url" if provider == "openai" else "'type': 'image'") in body  # vision model


def test_a_text_only_model_gets_no_image_parts():
    config = LLMConfig("compatible", "my-local-coder", base_url="http://x/v1")
    assert not accepts_images(config)
    with ScriptedLLM(Say(REPLY)) as server:
        provider = make_provider(_config(server, "compatible", "my-local-coder"))
        _ask(provider, images=(PNG,))
    assert "image" not in str(server.seen[0].body)


def test_429_then_success_is_retried_by_the_sdk_alone():
    with ScriptedLLM(Status(429), Say(REPLY)) as server:
        reply = _ask(make_provider(_config(server, "openai", "gpt-4o", max_retries=2)))
    assert reply.text == REPLY and len(server.seen) == 2


def test_server_errors_past_the_retries_are_an_error_of_kind_server():
    server = ScriptedLLM(Status(500), Status(500), Status(500))
    with server, pytest.raises(LLMError) as err:
        _ask(make_provider(_config(server, "anthropic", "claude-sonnet-5-5", max_retries=1)))
    assert err.value.kind == "server" and len(server.seen) == 2


def test_a_slow_server_times_out():
    with ScriptedLLM(Slow(3.0, Say(REPLY))) as server:
        config = _config(server, "openai", "gpt-4o", timeout_s=0.5, max_retries=0)
        with pytest.raises(LLMError) as err:
            _ask(make_provider(config))
    assert err.value.kind == "timeout"


def test_a_malformed_body_is_an_error_not_a_crash():
    with ScriptedLLM(Raw("this is not json")) as server, pytest.raises(LLMError):
        _ask(make_provider(_config(server, "openai", "gpt-4o", max_retries=0)))


def test_the_cache_answers_a_repeated_prompt_without_a_call(tmp_path):
    cache = ReplyCache(tmp_path)
    with ScriptedLLM(Say(REPLY, 10, 5)) as server:
        provider = make_provider(_config(server, "openai", "gpt-4o"), PRICES, cache)
        first, again = _ask(provider), _ask(provider)
        other = make_provider(_config(server, "openai", "gpt-4o", max_retries=0), PRICES, cache)
        with pytest.raises(LLMError):  # a different prompt is not in the cache: it calls
            _ask(other, text="something else")
    assert len(server.seen) == 2 and again.cached and not first.cached
    assert again.text == first.text and again.prompt_hash == first.prompt_hash
    assert again.cost_usd == 0.0  # a cached reply costs nothing


def test_keys_come_from_the_environment_and_never_show_in_errors(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(LLMError, match="set OPENAI_API_KEY") as err:
        make_provider(LLMConfig("openai", "gpt-4o"))
    assert err.value.kind == "auth"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret-value")
    with ScriptedLLM(Status(401)) as server, pytest.raises(LLMError) as err:
        _ask(make_provider(_config(server, "openai", "gpt-4o", max_retries=0)))
    assert err.value.kind == "auth" and "sk-very-secret-value" not in str(err.value)


def test_prices_and_configs_refuse_what_they_cannot_use(tmp_path):
    assert PriceTable.load().known("gpt-4o-2024-08-06")
    assert not PriceTable.load().known("my-local-coder")
    bad = tmp_path / "prices.json"
    bad.write_text('{"m": "cheap"}')
    with pytest.raises(ValueError, match="USD per million"):
        PriceTable.load(bad)
    with pytest.raises(ValueError, match="base-url"):
        LLMConfig("compatible", "m")
    with pytest.raises(ValueError, match="provider"):
        LLMConfig("bard", "m")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _failed(provider, model: str = "gpt-4o") -> LLMCall:
    with pytest.raises(LLMError) as err:
        _ask(provider)
    return LLMCall.of_error("writer", model, err.value)


def test_each_failure_is_a_call_with_its_status_attempts_and_reason(monkeypatch):
    with ScriptedLLM(Status(503), Status(503), Status(503)) as server:  # past 2 retries
        call = _failed(make_provider(_config(server, "openai", "gpt-4o", max_retries=2)))
    assert (call.status, call.http_status, call.attempts) == ("http_error", 503, 3)
    assert call.summary.startswith("http_error 503 after 3 attempts: server error 503")
    with ScriptedLLM(Slow(2.0, Say(REPLY)), Slow(2.0, Say(REPLY))) as server:
        slow = _config(server, "anthropic", "claude-sonnet-5-5", timeout_s=0.3, max_retries=1)
        call = _failed(make_provider(slow))
    assert (call.status, call.attempts) == ("timeout", 2) and call.latency_s >= 0.6
    port = _closed_port()
    refused = LLMConfig("openai", "gpt-4o", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    call = _failed(make_provider(refused))
    assert (call.status, call.attempts, call.http_status) == ("refused", 1, 0)
    with ScriptedLLM(Raw("this is not json")) as server:
        call = _failed(make_provider(_config(server, "openai", "gpt-4o", max_retries=0)))
    assert call.status == "unparsable" and "could not be read" in call.error
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(LLMError) as err:
        make_provider(LLMConfig("openai", "gpt-4o"))
    call = LLMCall.of_error("writer", "gpt-4o", err.value)
    assert (call.status, call.attempts) == ("no_key", 0) and "OPENAI_API_KEY" in call.summary


@pytest.mark.parametrize(
    ("provider", "model"), [("openai", "gpt-4o"), ("anthropic", "claude-sonnet-5-5")]
)
def test_a_reply_cut_at_the_output_limit_says_so_and_retries_are_counted(provider, model):
    with ScriptedLLM(Status(429), Say(REPLY, 10, 4096, cut=True), Say(REPLY)) as server:
        p = make_provider(_config(server, provider, model, max_retries=1, max_tokens=4096))
        cut, whole = _ask(p), _ask(p, "again")
    assert cut.truncated and cut.attempts == 2 and cut.tokens_out == 4096
    assert not whole.truncated and whole.attempts == 1
    assert server.seen[0].body["max_tokens"] == 4096


def test_the_default_output_limit_fits_a_long_module():
    assert LLMConfig("openai", "gpt-4o").max_tokens >= 16384
