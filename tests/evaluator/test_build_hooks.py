"""cache_cpp_builds installs one load_inline for the process; a later caller's wrap (the
launch counter) and audit replace the earlier ones. The screen installed it without a wrap,
and the harness's counter, installed after it, then saw no C++ launch."""

from __future__ import annotations

from typing import Any

from torch.utils import cpp_extension

from kforge_search.evaluator.build import cache_cpp_builds


def test_a_later_wrap_replaces_none(monkeypatch, tmp_path):
    built: list[str] = []

    def fake_load_inline(name: str, cpp_sources: Any, *args: Any, **kwargs: Any) -> Any:
        built.append(kwargs["build_directory"])
        return f"module {name}"

    monkeypatch.setattr(cpp_extension, "load_inline", fake_load_inline)
    cache_cpp_builds(tmp_path)  # as the screen does: no wrap
    assert cpp_extension.load_inline("ext", "int f();", functions=["f"]) == "module ext"
    wrapped: list[Any] = []

    def wrap(module: Any, functions: Any) -> Any:
        wrapped.append((module, functions))
        return f"counted {module}"

    cache_cpp_builds(tmp_path, wrap)  # as the test harness does, later in the same process
    got = cpp_extension.load_inline("ext", "int f();", functions=["f"])
    assert got == "counted module ext"
    assert wrapped == [("module ext", ["f"])]
    assert len(built) == 2 and built[0] == built[1]  # one folder per source: the cache's
    cache_cpp_builds(tmp_path)  # a caller without a wrap keeps the counter in place
    assert cpp_extension.load_inline("ext", "int f();", functions=["f"]) == "counted module ext"
