"""Processes an evaluation or a search starts, and their end: none outlives its owner.

Standard library only (the keeper runs under `python -S`): tree.py reads /proc, keeper.py owns
an evaluator child's whole tree, watch.py ends what a CLI command's Ray cluster left behind.
"""
