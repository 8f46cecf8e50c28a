"""kforge-search: searches for fast, verified kernels for PyTorch programs.

Importing this package is cheap: neither torch nor ray is imported at top level.
"""

from pathlib import Path as _Path

__version__ = "0.1.0"


def _checkout_root() -> str | None:
    """A source checkout run without installing it (`PYTHONPATH=<clone>`, as on the GPU
    machines): the packages that install inside this one (store/, actors/, prompts/ at the
    checkout's top level: pyproject's package-dir) are found through the checkout's root.
    Installed copies (wheel or editable) have them already and are left as they are."""
    here = _Path(__file__).resolve().parent
    root = here.parent
    if (here / "store").is_dir() or not (root / "pyproject.toml").is_file():
        return None
    has_all = all((root / sub / "__init__.py").is_file() for sub in ("store", "actors", "prompts"))
    return str(root) if has_all else None


if (_root := _checkout_root()) is not None:
    __path__.append(_root)  # this package's own search path
