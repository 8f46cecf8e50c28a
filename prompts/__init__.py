"""The agents' prompts: Jinja2 templates (*.j2) rendered with StrictUndefined, so a template
that names a variable the caller did not give fails loudly instead of sending a hole.
Installed as `kforge_search.prompts`; one-shot examples are plain text under oneshot/."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


@cache
def _env() -> Any:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def render(name: str, **values: Any) -> str:
    return _env().get_template(name).render(**values)


def oneshot(language: str) -> str:
    """The one-shot example for a platform's language ("" when there is none)."""
    path = HERE / "oneshot" / f"{language}.txt"
    return path.read_text() if path.is_file() else ""
