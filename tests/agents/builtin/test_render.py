"""The template environment under threads: `kforge bench --jobs N` renders from N threads."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kforge_search.agents.builtin import BuiltinAgent, CppGenome, TritonGenome, render
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem

PROBLEM = resolve_problem("level2/01_gemm_bias_relu", size_set="ci")
JOBS = (
    ("cpu-triton", TritonGenome()),
    ("cpu-triton", TritonGenome(placement="second_pass", split_k=2, block_m=16, block_n=32)),
    ("cpu-cpp", CppGenome()),
)


@pytest.fixture(scope="module")
def renders() -> list[tuple[str, dict[str, Any], str]]:
    """Every render_template call of the synthesizer for JOBS (template, values, text), made
    one after another. (The threads below render only: the synthesizer's other steps parse
    Python with `ast`, which CPython 3.11 does not make safe across threads.)"""
    calls: list[tuple[str, dict[str, Any], str]] = []
    real = render.render_template

    def record(template: str, **values: Any) -> str:
        calls.append((template, values, real(template, **values)))
        return calls[-1][2]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(render, "render_template", record)
        agent = BuiltinAgent()
        for name, genome in JOBS:
            agent.synthesize(PROBLEM, get_platform(name), genome, "test")
    # triton and C++ templates (the C++ library is rendered once per process: maybe before)
    assert {template.split("/")[0] for template, _, _ in calls} >= {"triton", "cpp"}
    return calls


def _at_once(renders: list[tuple[str, dict[str, Any], str]], threads: int) -> list[list[str]]:
    """Every recorded render made again by `threads` threads that start together."""
    start = threading.Barrier(threads)

    def one(_: int) -> list[str]:
        start.wait()
        return [render.render_template(template, **values) for template, values, _ in renders]

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, range(threads)))


def test_templates_render_the_same_from_many_threads_at_once(renders):
    expected = [text for _, _, text in renders]
    render._loaded.clear()  # the first load, too, from every thread at once
    assert all(texts == expected for texts in _at_once(renders, 16))


def test_rendering_reads_no_template_file_once_loaded(renders, monkeypatch):
    """Once loaded, a render never looks on disk again: a template file that is briefly not
    there (a checkout, a sync, another thread's lookup) cannot fail a render with
    TemplateNotFound, as it did in a --jobs 6 bench on the H100."""
    expected = [text for _, _, text in renders]
    real = os.path.isfile

    def isfile(path: object) -> bool:
        return False if str(render.TEMPLATES) in os.fspath(path) else real(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os.path, "isfile", isfile)
    assert all(texts == expected for texts in _at_once(renders, 8))
