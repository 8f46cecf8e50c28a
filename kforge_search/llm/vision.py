"""Which models take images (the visual-profiler path sends a roofline/timeline PNG)."""

from __future__ import annotations

from kforge_search.llm.config import LLMConfig

# Model-name prefixes of families that accept image input (2026); anything else: text only.
IMAGE_MODELS = (
    "gpt-4o", "gpt-4.1", "gpt-4-turbo", "gpt-5", "o1", "o3", "o4",
    "claude-3", "claude-sonnet", "claude-opus", "claude-haiku",
    "gemini", "llava", "qwen2-vl", "qwen2.5-vl", "pixtral", "llama-3.2-11b-vision",
    "llama-3.2-90b-vision",
)  # fmt: skip


def accepts_images(config: LLMConfig) -> bool:
    """The config's answer when it gives one, else by model family."""
    if config.images is not None:
        return config.images
    name = config.model.lower().rsplit("/", 1)[-1]
    return name.startswith(IMAGE_MODELS)
