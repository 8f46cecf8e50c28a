"""LLM providers for the generation and analysis agents.

`config` (LLMConfig, Message, Reply, LLMError), `providers` (OpenAI, Anthropic Messages, any
OpenAI-compatible base_url; async; the SDK's own retries only), `prices` (cost per call),
`cache` (replies keyed by prompt hash, for reproducible reruns), `vision` (which models take
images). API keys come only from the environment and are never logged or stored.
"""
