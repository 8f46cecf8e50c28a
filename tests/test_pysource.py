"""pysource.parse: threads that parse at once get their trees (cpython gh-106905 made bare
ast.parse raise a spurious SystemError under threads in 3.11)."""

from __future__ import annotations

import ast
import concurrent.futures

from kforge_search import pysource

NESTED = "x = " + "(" * 60 + "1" + ")" * 60 + "\n" + "def f(a):\n    return [b for b in a]\n"


def test_threads_parsing_at_once_get_whole_trees():
    def work(_: int) -> int:
        return sum(len(pysource.parse(NESTED).body) for _ in range(40))

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        counts = list(pool.map(work, range(16)))
    assert counts == [80] * 16


def test_modes_and_filenames_pass_through():
    assert isinstance(pysource.parse("1 + 2", mode="eval"), ast.Expression)
    try:
        pysource.parse("def (", filename="cand.py")
    except SyntaxError as exc:
        assert exc.filename == "cand.py"
    else:
        raise AssertionError("a syntax error must raise")
