"""Dims tokens: how the synthesizer names the dims of a value in the GEMM output's space.

"L0", "L1", ... are the leading dims of the first GEMM's input (rows), "C" the columns ("C",
"C1", "C2", ... when an input's trailing dims together are the columns), "G"
the segments of a row and "S" a segment's length ("S1", "S2", ... when a segment is viewed
as several dims, an image's pixels); the int 1 is a size-1 dim.
"""

from __future__ import annotations

Dims = tuple[str | int, ...]


def is_seg(token: str | int) -> bool:
    """Whether a dims token is a segment's length (S, or S1, S2, ... of an image's pixels)."""
    return isinstance(token, str) and token.startswith("S")


def rank(token: str | int) -> tuple[int, int]:
    text = str(token)
    if text.startswith("L"):
        return (0, int(text[1:]))
    if text == "G":
        return (1, 0)
    if is_seg(text):
        return (2, int(text[1:] or 0))
    return (3, int(text[1:] or 0))  # C, then C1, C2, ...: columns made of several dims


def canonical(dims: Dims) -> bool:
    """Whether the dims' tokens come in the kernels' order (leading dims, segments,
    columns): a value in another order (a broadcast such as (1, N, B, 1)) is computed in
    that order and permuted at the output only."""
    tokens = [t for t in dims if t != 1]
    return tokens == sorted(tokens, key=rank)


def is_col(token: str | int) -> bool:
    """Whether a dims token is (part of) the columns: C, or C1, C2, ... after it."""
    return isinstance(token, str) and token.startswith("C")
