"""`ast.parse` behind one lock.

CPython 3.11's converter from its internal tree to Python `ast` objects keeps a recursion
depth in state the threads share, so threads that parse at once can fail with a spurious
`SystemError: AST constructor recursion depth mismatch` (cpython gh-106905; 1 run in 3 with
16 threads here). `kforge bench --jobs N` parses problems and candidates in N threads.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    with _LOCK:
        return ast.parse(source, filename=filename, mode=mode)
