"""kforge-search: searches for fast, verified kernels for PyTorch programs.

Importing this package is cheap: neither torch nor ray is imported at top level.
"""

__version__ = "0.1.0"
