"""The template environment under threads: `kforge bench --jobs N` renders from N threads."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

from kforge_search.agents.builtin import BuiltinAgent, CppGenome, TritonGenome, render
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem

PROBLEM = resolve_problem("level2/01_gemm_bias_relu", size_set="ci")
JOBS = (
    ("cpu-triton", TritonGenome()),
    ("cpu-triton", TritonGenome(placement="second_pass", split_k=2, block_m=16, block_n=32)),
    ("cpu-cpp", CppGenome()),
)


def _sources(agent: BuiltinAgent) -> list[str]:
    return [
        agent.synthesize(PROBLEM, get_platform(name), genome, "test").source  # type: ignore[union-attr]
        for name, genome in JOBS
    ]


def _at_once(agent: BuiltinAgent, threads: int) -> list[list[str]]:
    """Every job rendered by `threads` threads that start together."""
    start = threading.Barrier(threads)

    def one(_: int) -> list[str]:
        start.wait()
        return _sources(agent)

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, range(threads)))


def test_templates_render_the_same_from_many_threads_at_once():
    agent = BuiltinAgent()
    agent.plan(PROBLEM)  # traced here: tracing itself is not thread-safe (bench locks it)
    render._loaded.clear()  # the first load, too, from every thread at once
    rendered = _at_once(agent, 16)
    assert all(sources == rendered[0] for sources in rendered)
    assert rendered[0] == _sources(agent)


def test_rendering_reads_no_template_file_once_loaded(monkeypatch):
    """Once loaded, a render never looks on disk again: a template file that is briefly not
    there (a checkout, a sync, another thread's lookup) cannot fail a render with
    TemplateNotFound, as it did in a --jobs 6 bench on the H100."""
    agent = BuiltinAgent()
    expected = _sources(agent)
    real = os.path.isfile

    def isfile(path: object) -> bool:
        return False if str(render.TEMPLATES) in os.fspath(path) else real(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os.path, "isfile", isfile)
    assert all(sources == expected for sources in _at_once(agent, 8))
