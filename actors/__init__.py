"""Thin Ray actor shells over plain kforge_search classes (lineages, evaluator pool, DB writer)."""
